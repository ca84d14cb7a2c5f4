"""Checkpoints are stored compressed, and checkpoints stored before that still load (issue 13).

SqliteSaver writes every channel's value and version string into every checkpoint; the
`step` policy writes a dozen per cycle, so these repeated bytes were most of its storage.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver

from contreact.checkpoints.db import Storage
from contreact.checkpoints.saver import COMPRESS_FROM_BYTES, open_saver, serializer

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
    from contreact.nodes.session import changes

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
    from contreact.checkpoints.db import prepare_sqlite_file

    ours, theirs = tmp_path / "ours.db", tmp_path / "theirs.db"
    prepare_sqlite_file(ours)
    with closing(sqlite3.connect(theirs, check_same_thread=False)) as conn:
        SqliteSaver(conn).setup()
    layouts = []
    for path in (ours, theirs):
        with closing(sqlite3.connect(path)) as conn:
            layouts.append(conn.execute("PRAGMA table_info(writes)").fetchall())
    assert layouts[0] == layouts[1]
