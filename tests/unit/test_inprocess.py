"""The in-process tier: the compiled graph, a scripted fake chat model, an in-memory saver.

Fast node-level checks of the seams, in the manner of LangGraph's own prebuilt-agent tests:
no stub server, no subprocess. The model is injected through `Context.chat_model`, the one
seam a test may replace; everything else (nodes, journal, SQLite tables and saver) is the
real code.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import BaseMessage

from contreact.checkpoints.cycles import cycle_records
from contreact.checkpoints.engines import engine_for
from contreact.checkpoints.memories import SqlMemory
from contreact.checkpoints.saver import open_saver
from contreact.config import parse_config
from contreact.graph.state import Context, fresh_cycle
from contreact.graph.wiring import builder
from contreact.tools.memory import ToolSession, memory_snapshot, search_memory_keys, write_memory
from support.chat import ScriptedChat, model, tool


def context(tmp_path: Path, chat: ScriptedChat) -> Context:
    return Context(model="fake", chat_model=chat, storage={"data_dir": str(tmp_path / "runs")})


@contextmanager
def compiled(ctx: Context) -> Iterator[Any]:
    """The graph on the run's own SQLite saver (fork points are read from its table)."""
    with open_saver(ctx.store) as saver:
        yield builder.compile(checkpointer=saver)


def start(run_id: str, cycles: int) -> dict[str, Any]:
    return {**fresh_cycle(1), "run_id": run_id, "last_cycle": cycles}


def system_of(prompt: list[BaseMessage]) -> str:
    return str(prompt[0].content)


def test_every_earlier_reflection_is_in_the_prompt_and_an_advisory_lasts_one_cycle(
    tmp_path: Path,
) -> None:
    same = "The tides rise and fall with the moon, and I watched them rise and fall."
    chat = model(same, same, "Quantum chess openings differ entirely from classical ones.", "ok")
    ctx = context(tmp_path, chat)
    thread = {"configurable": {"thread_id": "t-prompt"}}
    with compiled(ctx) as graph:
        final = graph.invoke(start("prompt", 4), thread, context=ctx)
    assert final["status"] == "completed"
    assert len(chat.prompts) == 4
    last = system_of(chat.prompts[3])
    for cycle, note in enumerate([same, same], start=1):
        assert f"Cycle {cycle}: {note}" in last
    assert "Cycle 3: Quantum chess" in last
    records = cycle_records(engine_for(ctx.store), "prompt")
    advisory = records[1].advisory
    assert advisory, "two identical reflections must leave an advisory"
    assert advisory in system_of(chat.prompts[2])
    assert records[2].advisory is None
    assert advisory not in last, "the advisory must not outlive the cycle after it"


def test_an_old_near_duplicate_beyond_the_recent_window_is_found_by_the_index(
    tmp_path: Path,
) -> None:
    """Past `similarity.recent` reflections the index, not a scan, finds a repetition."""
    from contreact.checkpoints.event_store import read_events

    plan = "I stored my thoughts on recursion under the key topic-3, then listed my keys."
    notes = [
        plan,
        "Drafted a haiku about tides: moon pulls water, shoreline breathes, gulls wait.",
        "Quantum chess openings differ entirely from classical ones, I learned today.",
        "Baking bread needs patience; the dough rose twice before the oven was ready.",
        plan.replace("topic-3", "topic-4"),
    ]
    chat = model(*notes)
    ctx = Context(
        model="fake",
        chat_model=chat,
        storage={"data_dir": str(tmp_path / "runs")},
        similarity={"recent": 2},
    )
    with compiled(ctx) as graph:
        final = graph.invoke(start("index", 5), {"configurable": {"thread_id": "t-i"}}, context=ctx)
    assert final["status"] == "completed"
    (fifth,) = [
        e["payload"]
        for e in read_events(engine_for(ctx.store), "index")
        if e["event_type"] == "SIMILARITY" and e["cycle_number"] == 5
    ]
    assert fifth["most_similar_cycle"] == 1 and fifth["level"] == "high"
    # Cycles 3 and 4 (the window) and cycle 1 (found by key); cycle 2 shares no key.
    assert [s["cycle"] for s in fifth["scores"]] == [1, 3, 4] and fifth["compared"] == 3


def test_time_travel_with_an_edit_calls_the_model_and_keeps_the_original(tmp_path: Path) -> None:
    first = model(
        tool("write", key="plan", value="plan one"),
        "Note one.",
        tool("write", key="plan", value="plan two"),
        "Note two.",
    )
    ctx = context(tmp_path, first)
    thread: Any = {"configurable": {"thread_id": "t-travel"}}
    stack = ExitStack()
    graph = stack.enter_context(compiled(ctx))
    graph.invoke(start("travel", 2), thread, context=ctx)
    engine = engine_for(ctx.store)
    original = (memory_snapshot(engine, "travel"), graph.get_state(thread).values)
    (cycle_2,) = [
        s
        for s in graph.get_state_history(thread)
        if s.values.get("cycle") == 2 and not s.values.get("messages") and s.next
    ]
    edited = graph.update_state(cycle_2.config, {"advisory": "Edited."}, as_node="reflect")
    second = model(tool("read", key="plan"), "Another note two.")
    final = graph.invoke(None, edited, context=ctx.model_copy(update={"chat_model": second}))

    assert len(second.prompts) == 2, "the branch's steps must call the model afresh"
    assert "Edited." in system_of(second.prompts[0])
    assert second.prompts[1][-1].content == "plan one", "memory as of the fork point"
    assert final["lineage"] and final["status"] == "completed"
    branch = f"travel@{final['lineage']}"
    assert [r.reflection for r in cycle_records(engine, branch)] == [
        "Note one.",
        "Another note two.",
    ]
    assert memory_snapshot(engine, branch) == {"plan": "plan one"}
    # The original branch is untouched.
    assert memory_snapshot(engine, "travel") == original[0] == {"plan": "plan two"}
    assert [r.reflection for r in cycle_records(engine, "travel")] == ["Note one.", "Note two."]
    assert graph.get_state(thread).values["lineage"] == final["lineage"]
    # A crash replay from the branch's fork point keeps the lineage (minted from the checkpoint).
    from contreact.checkpoints.lineage import mint

    assert final["lineage"] == mint("t-travel", edited["configurable"]["checkpoint_id"])
    stack.close()


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("_", "1 keys contain '_': a_b"),
        ("%", "1 keys contain '%': a%b"),
        ("notes", "1 keys contain 'notes': notes"),
        (".*", "No keys contain '.*'."),
    ],
)
def test_pattern_search_is_a_literal_case_sensitive_substring(
    tmp_path: Path, pattern: str, expected: str
) -> None:
    """`%`, `_` and regex characters are literal; `notes` does not match `Notes`."""
    engine = engine_for(Context(storage={"data_dir": str(tmp_path / "runs")}).store)
    with engine.begin() as conn:
        session = ToolSession(run_id="search", memory=SqlMemory(conn, "search"))
        for key in ("notes", "Notes", "a_b", "a%b", "axb", "aXb"):
            write_memory(session, key, "v")
        assert search_memory_keys(session, pattern) == expected


def test_studio_context_defaults_are_the_configs() -> None:
    """A run started in Studio (Context defaults) behaves like one from a minimal config."""
    derived = Context.of(parse_config({"run_id": "x", "model": "llama3.1:8b"}, "test"))
    assert Context() == derived


def test_invoke_sends_the_prompt_assemble_built(tmp_path: Path) -> None:
    """Every model call receives `prompt_of` the state assemble left, message for message."""
    from contreact.graph.state import AgentState
    from contreact.nodes.notes import notes_for_prompt, prompt_of
    from contreact.nodes.step import persistence_of

    chat = model("Note one.", tool("write", key="k", value="v"), tool("list"), "Note two.")
    ctx = context(tmp_path, chat)
    thread: Any = {"configurable": {"thread_id": "t-seam"}}
    with compiled(ctx) as graph:
        graph.invoke(start("seam", 2), thread, context=ctx)
        before_invoke = [
            AgentState(**s.values) for s in graph.get_state_history(thread) if s.next == ("invoke",)
        ][::-1]
    assert len(before_invoke) == len(chat.prompts) == 4
    for state, sent in zip(before_invoke, chat.prompts, strict=True):
        ledger = persistence_of(ctx).ledger("seam")
        notes = notes_for_prompt(ctx, ledger, state.cycle, since=state.reflections_from)
        built = prompt_of(state, notes, text_tools=False)
        assert [(m.type, m.content) for m in sent] == [(m.type, m.content) for m in built]
