"""What a driving process keeps between cycles is bounded by what later cycles reuse (issue 30).

A run driven for 10,000 cycles by one process must not hold something for every cycle:
the similarity monitor's n-gram arrays follow the texts a check compares, the prompt's
note costs the notes a window can reach. (The journal's keys: `test_journal_window`.)
"""

from __future__ import annotations

from contreact.nodes import notes
from contreact.text import similarity


def test_the_monitor_keeps_the_arrays_of_a_bounded_number_of_texts() -> None:
    index = similarity._GramIndex()
    compared = 164  # `recent` 100 + 16 bands x `per_key` 4, the defaults
    for cycle in range(1, 3_001):
        earlier = [
            f"note of cycle {c}, slot {c % 8}" for c in range(max(1, cycle - compared), cycle)
        ]
        index.arrays([*earlier, f"note of cycle {cycle}, slot {cycle % 8}"])
    assert len(index) == index.limit == similarity._GramIndex.MIN_TEXTS


def test_a_check_of_many_texts_keeps_twice_as_many() -> None:
    index = similarity._GramIndex()
    index.arrays([f"text {i}" for i in range(1_500)])  # `recent` 1,500
    assert index.limit == 3_000


def test_the_monitor_never_keeps_more_than_its_cap() -> None:
    index = similarity._GramIndex()
    index.arrays([f"text {i}" for i in range(5_000)])  # a report's whole matrix
    assert len(index) == similarity._GramIndex.MAX_TEXTS


def test_note_costs_are_cached_for_the_notes_in_reach_not_for_every_cycle() -> None:
    assert notes.note_tokens.cache_info().maxsize == 4096


def test_the_monitor_keeps_the_arrays_of_a_bounded_number_of_words() -> None:
    assert similarity._token_arrays.cache_info().maxsize == similarity.TOKEN_CACHE == 16_384
