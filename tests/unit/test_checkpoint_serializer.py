"""Checkpoints are stored compressed, and checkpoints stored before that still load.

SqliteSaver writes every channel's value and version string into every checkpoint; the
`step` policy writes a dozen per cycle, so these repeated bytes were most of its storage.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from operator import add
from pathlib import Path
from typing import Annotated, Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, StateGraph
from typing_extensions import TypedDict

from contreact.checkpoints.saver import COMPRESS_FROM_BYTES, open_saver, serializer
from contreact.checkpoints.storage import Storage

MESSAGES = [
    HumanMessage("Cycle 4 begins."),
    AIMessage(
        "",
        tool_calls=[{"name": "write", "args": {"key": "note", "value": "x" * 300}, "id": "c1"}],
    ),
    ToolMessage("Stored 'note'.", tool_call_id="c1"),
    AIMessage("Reflection for cycle 4. " * 20),
]


def test_large_values_are_compressed_and_load_back_equal() -> None:
    serde = serializer()
    kind, data = serde.dumps_typed(MESSAGES)
    assert kind == "msgpack+zlib"
    plain = JsonPlusSerializer().dumps_typed(MESSAGES)[1]
    assert len(data) < len(plain) / 2
    assert serde.loads_typed((kind, data)) == MESSAGES


def test_small_values_and_other_types_are_stored_as_langgraph_stores_them() -> None:
    serde = serializer()
    small: dict[str, Any] = {"steps": 2, "tool_calls": 1}
    kind, data = serde.dumps_typed(small)
    assert (kind, data) == JsonPlusSerializer().dumps_typed(small)
    assert len(data) < COMPRESS_FROM_BYTES
    assert serde.dumps_typed(None) == ("null", b"")
    assert serde.dumps_typed(b"\x00" * 1000) == ("bytes", b"\x00" * 1000)


def test_a_checkpoint_stored_uncompressed_before_still_loads(tmp_path: Path) -> None:
    """A database written by an earlier contreact (LangGraph's plain serializer)."""
    storage = Storage(f"sqlite:///{tmp_path / 'contreact.db'}", tmp_path)
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"messages": MESSAGES, "cycle": 4}
    checkpoint["channel_versions"] = {"messages": "0" * 32 + ".0.5", "cycle": "0" * 31 + "1.0.2"}
    config: Any = {"configurable": {"thread_id": "t1", "checkpoint_ns": ""}}
    with closing(sqlite3.connect(storage.sqlite_path, check_same_thread=False)) as conn:
        old = SqliteSaver(conn, serde=JsonPlusSerializer())
        old.setup()
        old.put(config, checkpoint, {"source": "loop", "step": 3}, {})
        (kind,) = conn.execute("SELECT type FROM checkpoints").fetchone()
        assert kind == "msgpack"
    with open_saver(storage) as saver:
        loaded = saver.get_tuple(config)
    assert loaded is not None
    assert loaded.checkpoint["channel_values"] == {"messages": MESSAGES, "cycle": 4}


def test_a_node_writes_only_the_fields_it_changes() -> None:
    """Unchanged fields are dropped from node updates (each write is a stored row)."""
    from langchain_core.messages import RemoveMessage

    from contreact.graph.state import AgentState, fresh_cycle, new_stats
    from contreact.nodes.step import changes

    state = AgentState(cycle=3, outcome="final", final_text="Done.", stats=new_stats())
    update = changes(state, fresh_cycle(4))
    assert update["cycle"] == 4 and update["outcome"] == "" and update["final_text"] == ""
    assert isinstance(update["messages"][0], RemoveMessage)  # appended to: always kept
    assert not {"stats", "pending", "flags", "advisory", "opening", "status"} & set(update)
    assert changes(state, {"stats": {**new_stats(), "steps": 1}}) == {
        "stats": {**new_stats(), "steps": 1}
    }


def test_our_writes_table_is_the_savers_own_column_for_column(tmp_path: Path) -> None:
    """The `writes` table we create in a new file must be the one SqliteSaver expects."""
    from contreact.checkpoints.sqlite_file import prepare_sqlite_file

    ours, theirs = tmp_path / "ours.db", tmp_path / "theirs.db"
    prepare_sqlite_file(ours)
    with closing(sqlite3.connect(theirs, check_same_thread=False)) as conn:
        SqliteSaver(conn).setup()
    layouts = []
    for path in (ours, theirs):
        with closing(sqlite3.connect(path)) as conn:
            layouts.append(conn.execute("PRAGMA table_info(writes)").fetchall())
    assert layouts[0] == layouts[1]


def _looping_graph(checkpointer: Any) -> Any:
    """A -> b -> a ... until `n` is 6: each node is triggered again by a channel it has seen."""

    class S(TypedDict):
        n: int
        trail: Annotated[list[str], add]

    builder = StateGraph(S)
    builder.add_node("a", lambda s: {"n": s["n"] + 1, "trail": ["a"]})
    builder.add_node("b", lambda s: {"n": s["n"] + 1, "trail": ["b"]})
    builder.add_edge(START, "a")
    builder.add_edge("a", "b")
    builder.add_conditional_edges("b", lambda s: "__end__" if s["n"] >= 6 else "a")
    return builder.compile(checkpointer=checkpointer, interrupt_after=["b"])


def _versions(saver: Any, config: Any) -> list[str]:
    found = saver.get_tuple(config)
    assert found is not None
    seen = [v for node in found.checkpoint["versions_seen"].values() for v in node.values()]
    return [*found.checkpoint["channel_versions"].values(), *seen]


def test_new_threads_get_short_versions_and_old_threads_keep_langgraphs(tmp_path: Path) -> None:
    """Versions of the two widths do not compare as numbers: a thread keeps its own width."""
    storage = Storage(f"sqlite:///{tmp_path / 'contreact.db'}", tmp_path)
    old: Any = {"configurable": {"thread_id": "old"}}
    with closing(sqlite3.connect(storage.sqlite_path, check_same_thread=False)) as conn:
        langgraphs = SqliteSaver(conn)  # an earlier contreact's saver
        _looping_graph(langgraphs).invoke({"n": 0, "trail": []}, old)  # a, b: paused
    new: Any = {"configurable": {"thread_id": "new"}}
    with open_saver(storage) as saver:
        for config, start in ((old, None), (new, {"n": 0, "trail": []})):
            graph = _looping_graph(saver)
            graph.invoke(start, config)
            while graph.get_state(config).next:
                graph.invoke(None, config)
            assert graph.get_state(config).values == {"n": 6, "trail": ["a", "b"] * 3}
        assert {len(v.split(".")[0]) for v in _versions(saver, old)} == {32}
        short = _versions(saver, new)
        assert {v[0] + str(len(v.split(".")[0])) for v in short} == {"+10"}
        assert max(len(v) for v in short) == 23


def test_a_thread_studio_continues_moves_to_long_versions_and_runs_on(tmp_path: Path) -> None:
    """LangGraph's API server writes its own long versions, whatever the saver says."""
    storage = Storage(f"sqlite:///{tmp_path / 'contreact.db'}", tmp_path)
    config: Any = {"configurable": {"thread_id": "t"}}
    with open_saver(storage) as saver:
        _looping_graph(saver).invoke({"n": 0, "trail": []}, config)  # a, b: paused
    with closing(sqlite3.connect(storage.sqlite_path, check_same_thread=False)) as conn:
        studio = SqliteSaver(conn, serde=serializer())  # versions as LangGraph's API makes them
        _looping_graph(studio).invoke(None, config)  # a, b
        newest = max(_versions(studio, config))
        assert len(newest.split(".")[0]) == 32, newest
    with open_saver(storage) as saver:
        graph = _looping_graph(saver)
        graph.invoke(None, config)  # a, b: done
        assert graph.get_state(config).values == {"n": 6, "trail": ["a", "b"] * 3}
        assert not graph.get_state(config).next


def test_short_versions_increase_and_differ_between_forks() -> None:
    from contreact.checkpoints.saver import next_version

    chain = [next_version(None)]
    for _ in range(200):
        chain.append(next_version(chain[-1]))
    assert chain == sorted(chain) and len(set(chain)) == len(chain)
    assert int(chain[-1].split(".")[0]) == 201
    # Two branches from one checkpoint bump the same counter to different versions.
    assert next_version(chain[5]) != next_version(chain[5])
    assert next_version("0" * 31 + "9.0.25").startswith("0" * 30 + "10.")
    # Every short version sorts below every long one (LangGraph compares them as strings).
    assert chain[-1] < f"{1:032}.{0.5:016}"
