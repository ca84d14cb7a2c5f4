"""Checkpointer factory: SqliteSaver (default), PostgresSaver or InMemorySaver from the storage URL.

The CLI and LangGraph Studio must open the same checkpoints, so both get their saver
here. SQLite needs `check_same_thread=False` (LangGraph calls the saver from worker
threads) and WAL so that a reader can look at a run while it is being written.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from contreact.checkpoints.db import (
    SQLITE_BUSY_TIMEOUT_MS,
    SQLITE_PRAGMAS,
    Storage,
    prepare_sqlite_file,
)

ALLOWED_TYPES = [("contreact.nodes.ollama_client", "ModelCallError")]
"""Our own types LangGraph may find in a checkpoint: a failed model call is stored as the
node's error write, and read back when the run is resumed. Everything else we checkpoint
is plain data or LangChain messages, which LangGraph's serializer allows by itself."""


def serializer() -> JsonPlusSerializer:
    """The checkpoint serializer: LangGraph's, with our own types allowed by name.

    Allowed explicitly, they load without warnings, and still load once LangGraph blocks
    unregistered types by default.
    """
    return JsonPlusSerializer(allowed_msgpack_modules=ALLOWED_TYPES)


def connect_sqlite(storage: Storage) -> sqlite3.Connection:
    """A SQLite connection tuned like the SQLAlchemy engine's (WAL, busy timeout)."""
    path = storage.sqlite_path
    prepare_sqlite_file(path)
    conn = sqlite3.connect(
        str(path), check_same_thread=False, timeout=SQLITE_BUSY_TIMEOUT_MS / 1000
    )
    for pragma in SQLITE_PRAGMAS:
        conn.execute(pragma)
    return conn


@contextmanager
def open_saver(storage: Storage | None) -> Iterator[BaseCheckpointSaver[Any]]:
    """Open the checkpointer for `storage` (`None` means in-memory, for tests and chat)."""
    if storage is None:
        yield InMemorySaver(serde=serializer())
        return
    if storage.is_sqlite:
        from langgraph.checkpoint.sqlite import SqliteSaver

        conn = connect_sqlite(storage)
        try:
            saver = SqliteSaver(conn, serde=serializer())
            saver.setup()
            yield saver
        finally:
            conn.close()
        return
    from langgraph.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string(storage.libpq_url) as pg_saver:
        pg_saver.serde = serializer()
        pg_saver.setup()
        yield pg_saver
