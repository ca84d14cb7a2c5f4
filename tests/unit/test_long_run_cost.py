"""A cycle late in a long run costs what an early one did.

200 cycles of a steady workload (each cycle writes one of 8 memory slots, reads it,
lists the keys and reflects in varied sentences) run in process, on the real nodes,
journal, SQLite tables and saver, with a scripted chat model. Wall time on a shared
machine is too noisy to assert, so the test counts work instead, per cycle, early in the
run (once the prompt window is full) and at its end:

* the character n-grams the similarity monitor computes, and the reflections it compares;
* the earlier notes a prompt is sized from;
* the bytes the checkpoint tables and contreact's tables grow by.

Constant work per cycle shows at 200 cycles as well as at 10,000: the wall-time figures
for long runs are printed by `benchmarks/cost/cycle_cost.py` and `benchmarks/cost/long_run.py`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage

from contreact.checkpoints.engines import engine_for
from contreact.checkpoints.event_store import read_events
from contreact.checkpoints.persistence import Checkpointed
from contreact.checkpoints.saver import open_saver
from contreact.graph.state import Context, fresh_cycle
from contreact.graph.wiring import builder
from contreact.nodes import notes as prompt_notes
from contreact.text import similarity

CYCLES = 200
EARLY = range(51, 101)
"""Early cycles, once the prompt window (num_ctx 2048) and the monitor's window (25 recent
reflections, and the older ones its index finds) are full."""
LATE = range(CYCLES - 49, CYCLES + 1)
SLOTS = 8

_OPENINGS = (
    "In cycle {c} I stored a fresh note in {s} and read it straight back.",
    "Cycle {c}: {s} now holds my latest observation, and the read confirmed it.",
    "This time (cycle {c}) I rewrote {s} and checked what the store returned.",
)
_MIDDLES = (
    "Listing the keys showed all eight slots in place.",
    "The key list still has eight entries; memory stays a fixed size.",
    "Eight keys remain, one per slot, so the overwrite worked.",
    "Nothing new appeared among the keys.",
)
_CLOSINGS = (
    "Next I will move on to the following slot.",
    "The routine is steady; I will watch for drift.",
    "Perhaps the next pass should record a summary instead.",
    "Later I might check how long ago each slot was refreshed.",
    "I want to see whether older values still make sense.",
)


def steady_answers(cycles: int) -> Iterator[AIMessage]:
    """The steady workload's model answers, four per cycle."""

    def call(name: str, **args: str) -> AIMessage:
        return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": "x"}])

    for c in range(1, cycles + 1):
        s = f"slot-{c % SLOTS}"
        yield call("write", key=s, value=f"observation from cycle {c}, kept in {s}")
        yield call("read", key=s)
        yield call("list")
        parts = (_OPENINGS[c % 3], _MIDDLES[c % 4], _CLOSINGS[c % 5])
        yield AIMessage(content=" ".join(parts).format(c=c, s=s))


class Counter:
    """Counts calls of a function, per cycle, by wrapping it where it is looked up."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, owner: Any, name: str) -> None:
        self.cycle = 0
        self.calls: dict[int, int] = {}
        inner = getattr(owner, name)

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[self.cycle] = self.calls.get(self.cycle, 0) + 1
            return inner(*args, **kwargs)

        monkeypatch.setattr(owner, name, counted)

    def worst(self, cycles: Sequence[int]) -> int:
        return max(self.calls.get(c, 0) for c in cycles)


def table_bytes(db: Path, tables: Sequence[str]) -> int:
    """Logical bytes of every column of every row of `tables`."""
    conn = sqlite3.connect(str(db))
    try:
        total = 0
        for table in tables:
            columns = [r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')]
            expr = " + ".join(f'coalesce(length("{c}"), 0)' for c in columns)
            total += conn.execute(f'SELECT coalesce(sum({expr}), 0) FROM "{table}"').fetchone()[0]
        return int(total)
    finally:
        conn.close()


CHECKPOINT_TABLES = ("checkpoints", "writes")
CONTREACT_TABLES = (
    "contreact_events",
    "contreact_journal",
    "contreact_memories",
    "contreact_cycles",
    "contreact_similarity_keys",
)


def test_work_and_bytes_per_cycle_at_cycle_200_are_what_they_were_at_cycle_50(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    grams = Counter(monkeypatch, similarity, "_text_arrays")
    notes = Counter(monkeypatch, prompt_notes, "note_tokens")
    chat = GenericFakeChatModel(messages=steady_answers(CYCLES))
    monkeypatch.setattr(GenericFakeChatModel, "bind_tools", lambda self, *a, **k: self)
    ctx = Context(
        model="fake",
        chat_model=chat,
        model_options={"num_ctx": 2048},
        similarity={"recent": 25},
        storage={"data_dir": str(tmp_path / "runs")},
    )
    db = ctx.store.data_dir / "contreact.db"
    marks = {EARLY[0] - 1, EARLY[-1], LATE[0] - 1, LATE[-1]}
    sizes: dict[int, tuple[int, int]] = {}
    start = {**fresh_cycle(1), "run_id": "long", "last_cycle": CYCLES}
    with open_saver(ctx.store) as saver:
        # Driven as the runner drives a run: one invocation per cycle, one checkpoint each.
        line = Checkpointed(
            builder.compile(checkpointer=saver), "t-long", "cycle", cycle_node="reflect"
        )
        payload: Any = start
        grams.cycle = notes.cycle = 1
        while grams.cycle <= CYCLES:
            for node, _ in line.stream(payload, context=ctx, config={"recursion_limit": 100}):
                if node == "reflect":
                    done = grams.cycle
                    if done in marks:
                        sizes[done] = (
                            table_bytes(db, CHECKPOINT_TABLES),
                            table_bytes(db, CONTREACT_TABLES),
                        )
                    grams.cycle = notes.cycle = done + 1
            payload = None
    assert grams.cycle == CYCLES + 1, "every cycle ran"

    # The similarity monitor: n-grams of this cycle's note only (earlier ones are kept),
    # and a bounded set of earlier notes compared, however many there are.
    assert grams.worst(LATE) <= grams.worst(EARLY) <= 4
    compared = {
        e["cycle_number"]: e["payload"]["compared"]
        for e in read_events(engine_for(ctx.store), "long")
        if e["event_type"] == "SIMILARITY"
    }
    limit = ctx.similarity.recent + similarity.INDEX_BANDS * ctx.similarity.per_key
    assert max(compared[c] for c in LATE) <= limit
    # Prompt assembly: only the notes within reach of the window are sized.
    assert notes.worst(LATE) <= 1.1 * notes.worst(EARLY)

    def per_cycle(window: range, which: int) -> float:
        return (sizes[window[-1]][which] - sizes[window[0] - 1][which]) / len(window)

    print(  # the figures, for `pytest -s`
        f"n-grams/cycle {grams.worst(EARLY)} -> {grams.worst(LATE)}; "
        f"notes sized/cycle {notes.worst(EARLY)} -> {notes.worst(LATE)}; "
        f"compared {max(compared[c] for c in EARLY)} -> {max(compared[c] for c in LATE)}; "
        f"checkpoint B/cycle {per_cycle(EARLY, 0):.0f} -> {per_cycle(LATE, 0):.0f}; "
        f"contreact B/cycle {per_cycle(EARLY, 1):.0f} -> {per_cycle(LATE, 1):.0f}"
    )
    # Checkpoints carry nothing that grows with the run; nor does a cycle's own data.
    assert per_cycle(LATE, 0) <= 1.1 * per_cycle(EARLY, 0)
    assert per_cycle(LATE, 1) <= 1.1 * per_cycle(EARLY, 1)
