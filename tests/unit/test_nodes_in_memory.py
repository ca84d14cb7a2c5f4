"""The nodes on the in-memory persistence, and the front door's contract held by both stores.

The nodes ask storage only what `checkpoints.persistence` promises, so the compiled graph runs
its five nodes on `MemoryPersistence` (dicts, no database file, no engine) with a scripted chat
model and LangGraph's in-memory saver. The contract cases run the same against the in-memory
store and the database (SQLite, and PostgreSQL where it runs), so the two cannot drift.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from contreact.checkpoints.engines import engine_for
from contreact.checkpoints.event_store import read_events
from contreact.checkpoints.journal import BadRecordError, skip_bad_records
from contreact.checkpoints.persistence import (
    CycleRecord,
    CycleStart,
    Event,
    Persistence,
    RunEnd,
    Unit,
    keys,
    sql_persistence,
)
from contreact.checkpoints.persistence.memory import MemoryPersistence
from contreact.graph.state import Context, fresh_cycle
from contreact.graph.wiring import builder
from contreact.nodes.step import node_started
from support.chat import ScriptedChat, model, tool

# --- the nodes on the in-memory store -----------------------------------------------------


def in_memory(tmp_path: Path, chat: ScriptedChat, store: MemoryPersistence) -> Context:
    return Context(
        model="fake",
        chat_model=chat,
        persistence_backend=store,
        storage={"data_dir": str(tmp_path / "runs")},
    )


def start(run_id: str, cycles: int) -> dict[str, Any]:
    return {**fresh_cycle(1), "run_id": run_id, "last_cycle": cycles}


def event_types(store: MemoryPersistence, scope: str) -> list[str]:
    return [e["event_type"] for e in store.event_lines(scope)]


def test_a_whole_cycle_runs_on_the_in_memory_store_without_a_database(tmp_path: Path) -> None:
    """assemble, invoke, parse, dispatch and reflect: tools write and read, the cycle is stored."""
    store = MemoryPersistence()
    chat = model(
        tool("write", key="plan", value="map the tides"),
        tool("read", key="plan"),
        "Note one: I planned to map the tides.",
    )
    ctx = in_memory(tmp_path, chat, store)
    graph = builder.compile(checkpointer=InMemorySaver())
    final = graph.invoke(start("mem", 1), {"configurable": {"thread_id": "t-mem"}}, context=ctx)

    assert final["status"] == "completed"
    assert len(chat.prompts) == 3
    # The read tool answered from what the write tool stored, in the next model call's prompt.
    assert chat.prompts[2][-1].content == "map the tides"
    assert store.memories["mem"] == {"plan": "map the tides"}
    (record,) = store.cycles["mem"].values()
    assert record.reflection == "Note one: I planned to map the tides."
    assert record.metrics["final_memory_keys"] == 1 and record.metrics["tool_calls"] == 2
    assert event_types(store, "mem") == [
        "RUN_START",
        "CYCLE_START",
        "LLM_INVOCATION",
        "TOOL_CALL",
        "LLM_INVOCATION",
        "TOOL_CALL",
        "LLM_INVOCATION",
        "SIMILARITY",
        "CYCLE_END",
        "RUN_END",
    ]
    assert not (tmp_path / "runs").exists(), "the nodes must not have touched a database"


def test_a_stored_reflection_is_in_the_next_cycles_prompt(tmp_path: Path) -> None:
    store = MemoryPersistence()
    chat = model("The first note.", "The second note.")
    ctx = in_memory(tmp_path, chat, store)
    graph = builder.compile(checkpointer=InMemorySaver())
    graph.invoke(start("two", 2), {"configurable": {"thread_id": "t-two"}}, context=ctx)

    assert [r.reflection for r in store.cycles["two"].values()] == [
        "The first note.",
        "The second note.",
    ]
    assert "Cycle 1: The first note." in str(chat.prompts[1][0].content)
    assert "The first note." not in str(chat.prompts[0][0].content)


def test_a_replayed_step_neither_calls_the_model_nor_runs_a_tool_again(tmp_path: Path) -> None:
    """The journal, not the saver, keeps a re-run dispatch from writing a second time."""
    store = MemoryPersistence()
    chat = model(tool("write", key="k", value="v"), "Done.")
    ctx = in_memory(tmp_path, chat, store)
    graph = builder.compile(checkpointer=InMemorySaver())
    thread: Any = {"configurable": {"thread_id": "t-replay"}}
    graph.invoke(start("replay", 1), thread, context=ctx)
    (before_dispatch,) = [s for s in graph.get_state_history(thread) if s.next == ("dispatch",)]
    events_before = store.event_lines("replay")

    ran: list[str] = []
    token = node_started.set(ran.append)
    try:
        final = graph.invoke(None, before_dispatch.config, context=ctx)
    finally:
        node_started.reset(token)

    assert ran[0] == "dispatch" and "invoke" in ran, "the steps after the checkpoint ran again"
    assert len(chat.prompts) == 2, "the model's answer was replayed from the journal"
    (result,) = [m for m in final["messages"] if isinstance(m, ToolMessage)]
    assert result.content == "Created memory 'k' (1 characters).", "not 'Updated': one write"
    assert store.event_lines("replay") == events_before
    assert final["status"] == "completed"


# --- the contract, on both stores ---------------------------------------------------------


@dataclass
class Door:
    """A persistence under test and how to read back what it stored."""

    persistence: Persistence
    events: Callable[[str], list[dict[str, Any]]]
    memories: Callable[[str], dict[str, str]]


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def door(request: pytest.FixtureRequest) -> Iterator[Door]:
    if request.param == "memory":
        store = MemoryPersistence()
        yield Door(store, store.event_lines, lambda scope: dict(store.memories.get(scope, {})))
        return
    from contreact.tools.memory import memory_snapshot

    backend = request.getfixturevalue(f"{request.param}_backend")
    storage = backend.storage()
    engine = engine_for(storage)
    yield Door(
        sql_persistence(storage),
        lambda scope: read_events(engine, scope),
        lambda scope: memory_snapshot(engine, scope),
    )


def shown(lines: list[dict[str, Any]]) -> list[tuple[str, int, dict[str, Any]]]:
    return [(e["event_type"], e["cycle_number"], e["payload"]) for e in lines]


def opening(cycle: int, text: str = "open") -> Event:
    return Event(cycle, keys.cycle_start(cycle), CycleStart(opening=text))


def test_an_act_runs_once_per_key_and_a_replay_returns_its_recorded_result(door: Door) -> None:
    ledger = door.persistence.ledger("contract")
    calls: list[int] = []

    def act(unit: Unit) -> tuple[dict[str, Any], list[Event]]:
        calls.append(1)
        unit.memory.put("k", f"v{len(calls)}")
        return {"pair": (1, 2), "n": len(calls)}, [opening(1)]

    replays: list[Any] = []
    first = door.persistence.ledger("contract").once("a", 1, act, replayed=replays.append)
    again = ledger.once("a", 1, act, replayed=replays.append)

    assert calls == [1] and first == {"pair": (1, 2), "n": 1}
    # A replay reads the record as stored: JSON, so a tuple comes back a list.
    assert again == {"pair": [1, 2], "n": 1} and replays == [again]
    assert door.memories("contract") == {"k": "v1"}
    opened = {"opening": "open", "advisory": None}
    assert shown(door.events("contract")) == [("CYCLE_START", 1, opened)]
    # Another scope (a branch) has its own records: it acts afresh.
    assert door.persistence.ledger("contract@b").once("a", 1, act)["n"] == 2


def test_an_act_that_raises_leaves_no_record_no_events_and_no_memory_change(door: Door) -> None:
    ledger = door.persistence.ledger("atomic")

    def dies(unit: Unit) -> tuple[None, list[Event]]:
        unit.memory.put("k", "v")
        raise RuntimeError("the process dies before the record commits")

    with pytest.raises(RuntimeError):
        ledger.once("a", 1, dies)
    assert door.memories("atomic") == {} and door.events("atomic") == []
    assert ledger.once("a", 1, lambda unit: ("acted", [])) == "acted"


def test_events_are_idempotent_by_key_counted_and_timed(door: Door) -> None:
    ledger = door.persistence.ledger("events")
    ledger.emit(opening(1), Event(1, keys.model_error(1, 0, 0), RunEnd(cycles=1)))
    ledger.emit(opening(1, "a second opening is not stored"), opening(2))

    assert shown(door.events("events")) == [
        ("CYCLE_START", 1, {"opening": "open", "advisory": None}),
        ("RUN_END", 1, {"status": "completed", "cycles": 1}),
        ("CYCLE_START", 2, {"opening": "open", "advisory": None}),
    ]
    assert ledger.count_events(key_prefix=keys.model_error_prefix(1, 0), cycle=1) == 1
    assert ledger.count_events(key_prefix=keys.model_error_prefix(1, 0), cycle=2) == 0

    def waited(unit: Unit) -> tuple[list[float | None], list[Event]]:
        return [unit.seconds_since(keys.cycle_start(1)), unit.seconds_since("nothing")], []

    since, missing = ledger.once("timed", 2, waited)
    assert since is not None and 0 <= since < 60 and missing is None


def test_a_cycle_stored_in_an_act_is_a_note_and_is_found_by_its_similarity_keys(
    door: Door,
) -> None:
    ledger = door.persistence.ledger("notes")
    for cycle, index in ((1, [7, 8]), (2, [9]), (3, [7])):

        def close(
            unit: Unit, cycle: int = cycle, index: list[int] = index
        ) -> tuple[bool, list[Event]]:
            unit.index_keys(cycle, index)
            record = CycleRecord(cycle=cycle, reflection=f"note {cycle}", opening="go")
            return unit.insert_cycle(record), []

        assert ledger.once(keys.cycle_end(cycle), cycle, close) is True

    tail = ledger.recent_notes(before=3, count=1)
    assert [n.reflection for n in tail.notes][-1:] == ["note 2"]
    assert tail.older + len(tail.notes) == 2

    def similar(unit: Unit) -> tuple[list[int], list[Event]]:
        found = unit.similar_notes([7, 9], before=3, per_key=1)
        return [n.cycle for n in found], []

    assert ledger.once("look", 3, similar) == [1, 2]


def test_a_record_its_step_cannot_use_is_named_or_replaced_by_its_stand_in(door: Door) -> None:
    ledger = door.persistence.ledger("bad")
    recorded = ledger.once("k", 1, lambda unit: ({"advisory": 5}, []))

    def use(record: dict[str, Any]) -> str:
        if not isinstance(record["advisory"], str):
            raise TypeError("the advisory is not text")
        return record["advisory"]

    with pytest.raises(BadRecordError):
        ledger.used("k", 1, recorded, use, lambda: {"advisory": "none"}, "a stand-in")
    token = skip_bad_records.set(True)
    try:
        assert ledger.used("k", 1, recorded, use, lambda: {"advisory": "none"}, "x") == "none"
    finally:
        skip_bad_records.reset(token)
    assert ledger.once("k", 1, lambda unit: ({"advisory": "acted again"}, [])) == {
        "advisory": "none"
    }
    assert [e["event_type"] for e in door.events("bad")] == ["RECORD_SKIPPED"]
