"""Tests for the token estimate (contreact/text/tokens.py) and contreact/nodes/context_budget.py."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from contreact.nodes.context_budget import (
    MESSAGE_OVERHEAD_TOKENS,
    Trim,
    fit_reflections,
    message_tokens,
    plan_trim,
)
from contreact.text.tokens import estimate_tokens

# ----------------------------------------------------------------------------- estimates


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("", 0),
        ("a", 1),
        ("abcd", 1),
        ("abcde", 2),
        ("a" * 400, 100),
        ("The quick brown fox jumps over the lazy dog.", 11),  # 44 chars
        ("café naïve", 3),  # accented Latin counts as Latin: 10 chars
        ("日本語", 2),  # 3 / 1.5
        ("日本語です", 4),  # Han + Hiragana: ceil(5 / 1.5)
        ("カタカナ", 3),  # ceil(4 / 1.5)
        ("안녕하세요", 4),  # Hangul: ceil(5 / 1.5)
        ("中" * 300, 200),
        ("hello 世界", 3),  # 6 Latin (1.5) + 2 CJK (1.33) -> ceil(2.83)
        ("Привет", 3),  # other scripts: 2 chars / token
        ("🌸🌸🌸🌸", 2),
    ],
)
def test_estimate_tokens(text: str, tokens: int) -> None:
    assert estimate_tokens(text) == tokens


def test_cjk_costs_more_per_char_than_latin() -> None:
    assert estimate_tokens("字" * 120) > estimate_tokens("x" * 120) * 2


@settings(max_examples=200, deadline=None)
@given(st.text(), st.text())
def test_estimate_is_monotone_and_subadditive(a: str, b: str) -> None:
    whole = estimate_tokens(a + b)
    assert whole >= max(estimate_tokens(a), estimate_tokens(b))
    assert whole <= estimate_tokens(a) + estimate_tokens(b)
    assert (whole == 0) == (a + b == "")


def test_message_tokens_counts_content_calls_and_overhead() -> None:
    assert message_tokens(HumanMessage(content="abcd")) == 1 + MESSAGE_OVERHEAD_TOKENS
    assert message_tokens(HumanMessage(content="")) == MESSAGE_OVERHEAD_TOKENS
    call = AIMessage(
        content="", tool_calls=[{"name": "read", "args": {"key": "journal"}, "id": "1"}]
    )
    # "read" -> 1; '{"key": "journal"}' (18 chars) -> 5
    assert message_tokens(call) == MESSAGE_OVERHEAD_TOKENS + 1 + 5
    blocks = HumanMessage(content=[{"type": "text", "text": "abcd"}, "efgh"])
    assert message_tokens(blocks) == MESSAGE_OVERHEAD_TOKENS + 2
    result = ToolMessage(content="x" * 40, tool_call_id="1")
    assert message_tokens(result) == MESSAGE_OVERHEAD_TOKENS + 10


def test_message_tokens_non_ascii_arguments_are_not_escaped() -> None:
    call = AIMessage(
        content="", tool_calls=[{"name": "w", "args": {"k": "日本語" * 10}, "id": "1"}]
    )
    escaped_cost = estimate_tokens('{"k": "' + "\\u65e5" * 30 + '"}')
    assert message_tokens(call) < MESSAGE_OVERHEAD_TOKENS + 1 + escaped_cost


# ----------------------------------------------------------------------------- plan_trim

_ids = iter(range(1_000_000))


def _call(n_results: int, size: int = 40) -> list[BaseMessage]:
    """An assistant tool-call message followed by its results."""
    ids = [f"t{next(_ids)}" for _ in range(n_results)]
    ai = AIMessage(
        content="x" * size,
        tool_calls=[{"name": "read", "args": {"key": i}, "id": i} for i in ids],
    )
    return [ai, *(ToolMessage(content="y" * size, tool_call_id=i) for i in ids)]


def _cycle(*groups: Sequence[BaseMessage]) -> list[BaseMessage]:
    return [HumanMessage(content="Cycle 3 begins."), *(m for g in groups for m in g)]


def _total(messages: Sequence[BaseMessage]) -> int:
    return sum(message_tokens(m) for m in messages)


def test_nothing_dropped_when_it_fits() -> None:
    messages = _cycle(_call(1), _call(2))
    total = _total(messages)
    assert plan_trim(messages, 100, 100 + total) == Trim((), 100 + total, 100 + total, True)


def test_drops_oldest_group_first_and_only_as_needed() -> None:
    g1, g2, g3 = _call(1), _call(2), _call(1)
    messages = _cycle(g1, g2, g3)
    budget = 50 + _total(messages) - _total(g1)  # exactly enough once g1 is gone
    trim = plan_trim(messages, 50, budget)
    assert trim.dropped == (1, 2)
    assert trim.fits and trim.tokens_after == budget
    assert trim.tokens_before == 50 + _total(messages)


def test_drops_several_groups_including_plain_messages() -> None:
    nudge = [HumanMessage(content="Your last message was empty.")]
    text = [AIMessage(content="thinking out loud " * 5)]
    g1, g4 = _call(2), _call(1)
    messages = _cycle(g1, nudge, text, g4)
    budget = _total(messages) - _total(g1) - _total(nudge)
    trim = plan_trim(messages, 0, budget)
    assert trim.dropped == (1, 2, 3, 4)
    assert trim.fits


def test_keeps_first_turn_and_newest_group_even_when_over_budget() -> None:
    messages = _cycle(_call(1), _call(1), _call(3, size=400))
    trim = plan_trim(messages, 10, 1)
    assert trim.dropped == (1, 2, 3, 4)
    assert not trim.fits
    kept = [m for i, m in enumerate(messages) if i not in trim.dropped]
    assert trim.tokens_after == 10 + _total(kept)
    assert isinstance(kept[0], HumanMessage)
    assert isinstance(kept[1], AIMessage) and all(isinstance(m, ToolMessage) for m in kept[2:])


def test_fixed_tokens_alone_over_budget() -> None:
    messages = _cycle(_call(1))
    trim = plan_trim(messages, 10_000, 100)
    assert trim.dropped == ()  # only the first turn and the newest group: both stay
    assert not trim.fits


@pytest.mark.parametrize("messages", [[], [HumanMessage(content="Cycle 1 begins.")]])
def test_tiny_cycles(messages: list[BaseMessage]) -> None:
    fits = plan_trim(messages, 5, 10_000)
    assert fits.dropped == () and fits.fits
    over = plan_trim(messages, 5, 0)
    assert over.dropped == () and not over.fits
    assert over.tokens_before == over.tokens_after == 5 + _total(messages)


def test_orphan_tool_message_is_its_own_group() -> None:
    orphan = ToolMessage(content="z" * 200, tool_call_id="lost")
    messages = [HumanMessage(content="Cycle 1 begins."), orphan, *_call(1)]
    trim = plan_trim(messages, 0, _total(messages) - 1)
    assert trim.dropped == (1,)


GROUP_SPECS = st.lists(
    st.one_of(
        st.tuples(st.just("calls"), st.integers(1, 3), st.integers(0, 300)),
        st.tuples(st.just("human"), st.just(0), st.integers(0, 300)),
        st.tuples(st.just("text"), st.just(0), st.integers(0, 300)),
    ),
    max_size=8,
)


def _build(specs: list[tuple[str, int, int]]) -> tuple[list[BaseMessage], list[list[int]]]:
    messages: list[BaseMessage] = [HumanMessage(content="Cycle 1 begins.")]
    groups: list[list[int]] = [[0]]
    for kind, n, size in specs:
        start = len(messages)
        if kind == "calls":
            messages.extend(_call(n, size))
        elif kind == "human":
            messages.append(HumanMessage(content="h" * size))
        else:
            messages.append(AIMessage(content="a" * size))
        groups.append(list(range(start, len(messages))))
    return messages, groups


@settings(max_examples=300, deadline=None)
@given(GROUP_SPECS, st.integers(0, 2_000), st.integers(-10, 3_000))
def test_property_trim_invariants(
    specs: list[tuple[str, int, int]], fixed: int, budget: int
) -> None:
    messages, groups = _build(specs)
    trim = plan_trim(messages, fixed, budget)
    sizes = [message_tokens(m) for m in messages]
    dropped = set(trim.dropped)

    assert list(trim.dropped) == sorted(dropped)
    assert trim.tokens_before == fixed + sum(sizes)
    assert trim.tokens_after == fixed + sum(s for i, s in enumerate(sizes) if i not in dropped)
    assert trim.fits == (trim.tokens_after <= budget)
    assert 0 not in dropped
    if len(groups) > 1:
        assert not dropped & set(groups[-1])  # the newest group always stays

    # Whole groups only: a tool-call message and its results go (or stay) together.
    for group in groups:
        assert set(group) <= dropped or not set(group) & dropped
    for i, message in enumerate(messages):
        if isinstance(message, ToolMessage):
            owner = max(j for j in range(i) if isinstance(messages[j], AIMessage))
            assert (i in dropped) == (owner in dropped)

    # Oldest first, and no more than needed.
    dropped_groups = [g for g in groups if set(g) <= dropped]
    assert dropped_groups == groups[1 : 1 + len(dropped_groups)]
    if trim.tokens_before <= budget:
        assert not dropped
    elif dropped_groups:
        last = sum(sizes[i] for i in dropped_groups[-1])
        assert trim.tokens_after + last > budget
    if not trim.fits:
        assert dropped_groups == groups[1:-1]


# ----------------------------------------------------------------------------- reflections


@pytest.mark.parametrize(
    ("tokens", "budget", "left_out"),
    [
        ([], 0, 0),
        ([], -5, 0),
        ([10, 20, 30], 60, 0),
        ([10, 20, 30], 1_000, 0),
        ([10, 20, 30], 59, 1),
        ([10, 20, 30], 50, 1),
        ([10, 20, 30], 49, 2),
        ([10, 20, 30], 30, 2),
        ([10, 20, 30], 29, 3),
        ([10, 20, 30], 0, 3),
        ([10, 20, 30], -1, 3),
        ([0, 0], 0, 0),
        ([100, 1, 1], 2, 1),
    ],
)
def test_fit_reflections(tokens: list[int], budget: int, left_out: int) -> None:
    assert fit_reflections(tokens, budget) == left_out


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 500), max_size=12), st.integers(-50, 3_000))
def test_property_fit_reflections_is_minimal(tokens: list[int], budget: int) -> None:
    k = fit_reflections(tokens, budget)
    assert 0 <= k <= len(tokens)
    if sum(tokens[k:]) > budget:
        assert k == len(tokens)  # nothing left to leave out
    if k > 0:
        assert sum(tokens[k - 1 :]) > budget


def test_tool_call_helper_shapes() -> None:
    group: list[Any] = _call(2)
    assert isinstance(group[0], AIMessage) and len(group[0].tool_calls) == 2
    assert [type(m) for m in group[1:]] == [ToolMessage, ToolMessage]
