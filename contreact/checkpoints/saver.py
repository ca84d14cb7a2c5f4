"""Checkpointer factory: SqliteSaver (default), PostgresSaver or InMemorySaver from the storage URL.

The CLI and LangGraph Studio must open the same checkpoints, so both get their saver
here. SQLite needs `check_same_thread=False` (LangGraph calls the saver from worker
threads) and WAL so that a reader can look at a run while it is being written.

Checkpoints are compressed (`CompressingSerializer`): SqliteSaver stores every channel's
value and every channel's version string in each checkpoint, so without it storage per
cycle in the `step` policy is dominated by the same bytes written a dozen times.
"""

from __future__ import annotations

import random
import sqlite3
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from contreact.checkpoints.engines import engine_for
from contreact.checkpoints.sqlite_file import (
    busy_timeout_ms,
    prepare_sqlite_file,
    sqlite_pragmas,
    truncate_wal,
)
from contreact.checkpoints.storage import Storage
from contreact.checkpoints.stored_text import json_dumps, json_loads

ALLOWED_TYPES = [("contreact.ollama.client", "ModelCallError")]
"""Our own types LangGraph may find in a checkpoint: a failed model call is stored as the
node's error write, and read back when the run is resumed. Everything else we checkpoint
is plain data or LangChain messages, which LangGraph's serializer allows by itself."""


COMPRESSED_SUFFIX = "+zlib"
"""Appended to the serializer's type tag of a compressed value (`msgpack+zlib`), the way
LangGraph's `EncryptedSerializer` tags its ciphertext; an untagged value (every checkpoint
written before compression, and small values) loads as it always did."""

COMPRESS_FROM_BYTES = 256
"""Smaller values are stored as they are: zlib would save little or nothing on them."""

ZLIB_LEVEL = 1
"""zlib's fastest level: the bytes it leaves over level 6 are few (the repeated version
strings and message keys compress at any level), its CPU per checkpoint is a third."""


class CompressingSerializer(JsonPlusSerializer):
    """LangGraph's serializer, with values of `COMPRESS_FROM_BYTES` or more zlib-compressed."""

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        """`(type, bytes)` as LangGraph's, compressed and tagged when that pays."""
        type_, data = super().dumps_typed(obj)
        if type_ != "msgpack" or len(data) < COMPRESS_FROM_BYTES:
            return type_, data
        packed = zlib.compress(data, ZLIB_LEVEL)
        if len(packed) >= len(data):
            return type_, data
        return type_ + COMPRESSED_SUFFIX, packed

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        """The value of `(type, bytes)`, compressed or not."""
        type_, payload = data
        if type_.endswith(COMPRESSED_SUFFIX):
            return super().loads_typed(
                (type_.removesuffix(COMPRESSED_SUFFIX), zlib.decompress(payload))
            )
        return super().loads_typed(data)


SHORT_PREFIX = "+"
"""Marks our channel versions; it sorts before the digits of LangGraph's (see `next_version`)."""


def next_version(current: str | int | None) -> str:
    """The channel version after `current`: short for new threads, LangGraph's for old ones.

    LangGraph's SQLite and PostgreSQL savers write `{n:032}.{random float:016}`, 49
    characters, and every checkpoint stores one per channel and per channel a node has
    seen: a fifth of a `step` checkpoint's bytes on PostgreSQL, where they are not
    compressed. Ours is `+{n:09}.{48 random bits:012x}` (23). The counter orders versions
    (LangGraph compares them as strings, and bumps every channel it updates past the
    greatest version in the checkpoint); the random part keeps two forks of one thread
    from writing different values under the same version (the PostgreSQL saver shares
    blobs between checkpoints by channel and version).

    The `+` makes every short version sort below every long one, and `int()` still reads
    its counter. That matters because LangGraph's API server (Studio) writes long versions
    whatever the saver says: a thread it continues moves to long versions, which then
    outrank all the short ones, and from then on this function keeps them long too.
    """
    if isinstance(current, str):
        counter = current.split(".", 1)[0]
        if not counter.startswith(SHORT_PREFIX):
            return f"{int(counter) + 1:032}.{random.random():016}"
        number = int(counter)
    else:
        number = current or 0
    return f"{SHORT_PREFIX}{number + 1:09}.{random.getrandbits(48):012x}"


def serializer() -> JsonPlusSerializer:
    """The checkpoint serializer: LangGraph's, compressing, with our own types allowed by name.

    Allowed explicitly, they load without warnings, and still load once LangGraph blocks
    unregistered types by default.
    """
    return CompressingSerializer(allowed_msgpack_modules=ALLOWED_TYPES)


def connect_sqlite(storage: Storage) -> sqlite3.Connection:
    """A SQLite connection tuned like the SQLAlchemy engine's (WAL, busy timeout)."""
    path = storage.sqlite_path
    prepare_sqlite_file(path)
    conn = sqlite3.connect(str(path), check_same_thread=False, timeout=busy_timeout_ms() / 1000)
    for pragma in sqlite_pragmas():
        conn.execute(pragma)
    return conn


class ShortVersions:
    """Mixed into every saver that writes our threads (CLI and Studio): one version format."""

    def get_next_version(self, current: Any, channel: None) -> str:
        """See `next_version`."""
        return next_version(current)


@cache
def _sqlite_saver() -> Any:
    from langgraph.checkpoint.sqlite import SqliteSaver

    class ContreactSqliteSaver(ShortVersions, SqliteSaver):
        """SqliteSaver with shorter channel versions for new threads."""

    return ContreactSqliteSaver


def store_any_text(conn: Any) -> None:
    """Make a psycopg connection's `jsonb` values hold any text, NUL included.

    LangGraph's PostgreSQL savers keep a checkpoint's plain values (a state's strings: the
    model's final answer among them) and its metadata in `jsonb`, which refuses NUL; the
    rest goes to `bytea` blobs, which take anything. This connection writes and reads its
    JSON through `stored_text.json_dumps` and `json_loads`, which escape such strings
    reversibly (as every text column of contreact's own tables does).
    """
    from psycopg.types.json import set_json_dumps, set_json_loads

    set_json_dumps(json_dumps, conn)
    set_json_loads(json_loads, conn)


SETUP_LOCK = "SELECT pg_try_advisory_lock(hashtext('contreact_checkpoint_setup'))"
"""Taken while LangGraph's PostgreSQL migrations run: processes starting together on a new
database would race to create the same tables and types, and all but one would fail.
Tried, not waited for: a statement waiting on the lock holds a snapshot, and the
migrations' `CREATE INDEX CONCURRENTLY` waits for every snapshot older than its own."""

SETUP_UNLOCK = "SELECT pg_advisory_unlock(hashtext('contreact_checkpoint_setup'))"

SETUP_POLL_S = 0.05


def _fetched(conn: Any, query: str) -> Any:
    """The one value `query` selects (the saver's connection gives rows as dicts)."""
    row = conn.execute(query).fetchone()
    return None if row is None else next(iter(row.values()))


@cache
def _postgres_saver() -> Any:
    from langgraph.checkpoint.postgres import PostgresSaver

    class ContreactPostgresSaver(ShortVersions, PostgresSaver):
        """PostgresSaver with shorter channel versions for new threads, set up one at a time."""

        def setup(self) -> None:
            """LangGraph's migrations, under a lock unless every one has run (`SETUP_LOCK`)."""
            import psycopg

            conn = self.conn
            if not isinstance(conn, psycopg.Connection):
                super().setup()  # a pool (contreact opens one connection): no session to lock
                return
            if self._migrated(conn):
                return
            while not _fetched(conn, SETUP_LOCK):
                time.sleep(SETUP_POLL_S)
            try:
                super().setup()
            finally:
                conn.execute(SETUP_UNLOCK)

        def _migrated(self, conn: Any) -> bool:
            """Whether the database holds every migration of this LangGraph (one query)."""
            import psycopg

            try:  # an autocommit connection: a failed statement leaves nothing open
                found = _fetched(conn, "SELECT max(v) FROM checkpoint_migrations")
            except psycopg.errors.UndefinedTable:
                return False
            return bool(found == len(self.MIGRATIONS) - 1)

    return ContreactPostgresSaver


@contextmanager
def open_saver(storage: Storage | None) -> Iterator[BaseCheckpointSaver[Any]]:
    """Open the checkpointer for `storage` (`None` means in-memory, for tests and chat)."""
    if storage is None:
        yield InMemorySaver(serde=serializer())
        return
    # Our tables first: a storage that must exist is checked before anything is made, and
    # its database is brought up to date.
    engine_for(storage)
    if storage.is_sqlite:
        conn = connect_sqlite(storage)
        try:
            saver: Any = _sqlite_saver()(conn, serde=serializer())
            saver.setup()
            yield saver
        finally:
            truncate_wal(conn)
            conn.close()
        return
    with _postgres_saver().from_conn_string(storage.libpq_url) as pg_saver:
        pg_saver.serde = serializer()
        store_any_text(pg_saver.conn)
        pg_saver.setup()
        yield pg_saver
