"""One SQLAlchemy engine per storage URL, and the tables contreact keeps beside the checkpoints.

Checkpoints, memory, the run registry, the event log and the side-effect journal live in
one database (a SQLite file in the data directory, or PostgreSQL by URL) so that a side
effect and its record can commit in one transaction: that is what makes crash + resume
exactly-once. The same code serves both backends; only the URL differs.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Protocol

from sqlalchemy import (
    Boolean,
    Column,
    Engine,
    Float,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    bindparam,
    create_engine,
    delete,
    event,
    insert,
    inspect,
    select,
    text,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Dialect, make_url
from sqlalchemy.exc import DBAPIError

from contreact.checkpoints.locations import DB_FILENAME, default_data_dir
from contreact.checkpoints.private_files import private_dir, touch_private
from contreact.checkpoints.storage_faults import StorageFault, check_sqlite_file, storage_fault

SQLITE_BUSY_TIMEOUT_MS = int(os.environ.get("CONTREACT_SQLITE_BUSY_TIMEOUT_MS") or 30_000)
"""How long a write waits for a SQLite file another process holds locked before it fails
(with one line naming the file); the environment variable shortens it for tests."""

metadata = MetaData()

runs = Table(
    "contreact_runs",
    metadata,
    Column("run_id", String(200), primary_key=True),
    Column("thread_id", String(64), nullable=False, unique=True),
    Column("status", String(20), nullable=False),
    Column("model", String(200), nullable=False),
    Column("host", String(500), nullable=False, default=""),
    Column("config", Text, nullable=False),
    Column("reason", Text, nullable=False, default=""),
    Column("parent_run_id", String(200), nullable=True),
    Column("fork_cycle", Integer, nullable=True),
    Column("batch", String(200), nullable=True, index=True),
    Column("pid", Integer, nullable=True),
    Column("origin", String(20), nullable=False, default="cli", server_default="cli"),
    # Epoch seconds, refreshed every second while a process drives the run: a run whose
    # heartbeat stopped is interrupted, whatever machine or container drove it.
    Column("heartbeat", Float, nullable=True),
    Column("driver_host", String(255), nullable=True),
    Column("created_at", String(40), nullable=False),
    Column("updated_at", String(40), nullable=False),
)

events = Table(
    "contreact_events",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", String(200), nullable=False, index=True),
    Column("key", String(200), nullable=False),
    Column("cycle", Integer, nullable=False),
    Column("event_type", String(40), nullable=False),
    Column("timestamp", String(40), nullable=False),
    Column("payload", Text, nullable=False),
    UniqueConstraint("run_id", "key", name="uq_contreact_events_run_key"),
)

journal = Table(
    "contreact_journal",
    metadata,
    Column("run_id", String(200), primary_key=True),
    Column("key", String(200), primary_key=True),
    Column("cycle", Integer, nullable=False),
    Column("result", Text, nullable=False),
)

memories = Table(
    "contreact_memories",
    metadata,
    Column("run_id", String(200), primary_key=True),
    Column("key", Text, primary_key=True),
    Column("value", Text, nullable=False),
)

lineages = Table(
    "contreact_lineages",
    metadata,
    Column("scope", String(300), primary_key=True),
    Column("run_id", String(200), nullable=False, index=True),
    Column("parent_scope", String(300), nullable=False),
    Column("thread_id", String(64), nullable=False),
    Column("checkpoint_id", String(64), nullable=False),
    Column("cycle", Integer, nullable=False),
    Column("steps", Integer, nullable=False),
    Column("steps_done", Integer, nullable=False),
    Column("created_at", String(40), nullable=False),
)
"""Branches of runs: each scope (see `checkpoints.lineage`) and where it left its parent."""

cycles = Table(
    "contreact_cycles",
    metadata,
    Column("run_id", String(200), primary_key=True),
    Column("cycle", Integer, primary_key=True),
    Column("opening", Text, nullable=False, default="", server_default=""),
    Column("reflection", Text, nullable=False),
    Column("metrics", Text, nullable=False),
    Column("flags", Text, nullable=False),
    Column("similarity", Float, nullable=True),
    Column("advisory", Text, nullable=True),
)


pei = Table(
    "contreact_pei",
    metadata,
    Column("run_id", String(200), primary_key=True),
    Column("evaluator", String(200), primary_key=True),
    Column("fork_run_id", String(200), nullable=False),
    Column("at_cycle", Integer, nullable=False),
    Column("level", Integer, nullable=True),
    Column("reason", Text, nullable=False, default=""),
    Column("answer", Text, nullable=False),
    Column("instrument_sha", String(64), nullable=False),
    Column("created_at", String(40), nullable=False),
    Column("omitted", Text, nullable=True),
    Column("manual", Boolean, nullable=False, server_default="0"),
)
"""One PEI rating per (rated run, evaluator model); `level` is None when none was parsed.

`omitted` (JSON) says what of the history did not fit the evaluator's context; `manual`
marks a level set by hand."""


@dataclass(frozen=True)
class Storage:
    """Where one installation keeps its data: a database URL and a folder for JSONL logs."""

    url: str
    data_dir: Path

    @property
    def logs_dir(self) -> Path:
        """Folder of the per-run JSONL event logs."""
        return self.data_dir / "logs"

    @property
    def is_sqlite(self) -> bool:
        """True for the default single-file backend."""
        return self.url.startswith("sqlite")

    @property
    def sqlite_path(self) -> Path:
        """The SQLite database file (only meaningful when `is_sqlite`)."""
        database = make_url(self.url).database
        if not database:
            raise ValueError(f"SQLite URL has no file: {self.url}")
        return Path(database)

    @property
    def shown_url(self) -> str:
        """The URL for people and logs: the password, if any, as `***`."""
        return make_url(self.url).render_as_string(hide_password=True)

    def redact(self, text: str) -> str:
        """`text` (an error message, say) with this URL's password, if any, as `***`."""
        password = make_url(self.url).password
        return text.replace(str(password), "***") if password else text

    @property
    def libpq_url(self) -> str:
        """The PostgreSQL URL in the form psycopg expects (no `+driver`)."""
        url = make_url(self.url)
        return url.set(drivername="postgresql").render_as_string(hide_password=False)


def resolve_storage(data_dir: str | Path | None = None, url: str | None = None) -> Storage:
    """Turn the configured data directory and/or URL into a `Storage`.

    Args:
        data_dir: Folder for the SQLite file and the logs; default `default_data_dir()`.
        url: A SQLAlchemy URL (`sqlite:///...` or `postgresql+psycopg://...`); when absent,
            `CONTREACT_DB_URL`, else the SQLite file inside `data_dir`.
    """
    folder = Path(data_dir) if data_dir else default_data_dir()
    folder = folder.expanduser().resolve()
    url = url or os.environ.get("CONTREACT_DB_URL") or None
    if url:
        if url.startswith("postgresql://") or url.startswith("postgres://"):
            url = "postgresql+psycopg://" + url.split("://", 1)[1]
        if not (url.startswith("sqlite") or url.startswith("postgresql+psycopg")):
            raise ValueError(
                f"storage.url must be sqlite:///FILE or postgresql+psycopg://..., got {url!r}"
            )
        return Storage(url=url, data_dir=folder)
    return Storage(url=f"sqlite:///{folder / DB_FILENAME}", data_dir=folder)


_engines: dict[str, Engine] = {}
_engines_lock = threading.Lock()


SQLITE_PRAGMAS = (
    "PRAGMA journal_mode=WAL",
    f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}",
    "PRAGMA synchronous=NORMAL",
)
"""Every SQLite connection contreact opens (SQLAlchemy, the CLI's saver, Studio's saver).

WAL lets readers (status, Studio) run beside a writer; the busy timeout turns short lock
waits between concurrent runs into waits instead of errors; synchronous=NORMAL in WAL
survives kill -9 (only power loss can drop the tail)."""


def _tune_sqlite(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    for pragma in SQLITE_PRAGMAS:
        cur.execute(pragma)
    cur.close()


SQLITE_PAGE_SIZE = 8192
"""Page size of a new database file. A compressed checkpoint row is 1-2 KiB: two fit a
4 KiB page with a third of it left empty, five fit an 8 KiB page."""

SAVER_WRITES_TABLE = """
CREATE TABLE IF NOT EXISTS writes (
    thread_id TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL DEFAULT '',
    checkpoint_id TEXT NOT NULL,
    task_id TEXT NOT NULL,
    task_path TEXT NOT NULL DEFAULT '',
    idx INTEGER NOT NULL,
    channel TEXT NOT NULL,
    type TEXT,
    value BLOB,
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, idx)
) WITHOUT ROWID
"""
"""SqliteSaver's `writes` table (langgraph-checkpoint-sqlite 3.x, column for column), made
by us in a new database file before the saver's `setup` (whose `CREATE TABLE IF NOT
EXISTS` then leaves it be), as a WITHOUT ROWID table: its rows are small and found only by
their primary key, and a rowid table stores that key twice (row and index), which made
the writes of the `step` policy a third of its storage. Databases made before keep theirs."""

_prepared: set[str] = set()
"""The SQLite files this process has checked or created (see `prepare_sqlite_file`)."""
_prepared_lock = threading.Lock()


def prepare_sqlite_file(path: Path) -> None:
    """Create the SQLite file (owner-only, with a valid header) or check the existing one.

    A new file is made under a temporary name, given its header (switching it to WAL
    writes page 1) and linked into place, so the file under the real name is never
    empty: an empty one was truncated, and `check_sqlite_file` says so instead of
    letting SQLite take it for a new database.

    Checked once per process, before its first connection: closing any other file
    descriptor of a SQLite file drops every POSIX lock the process holds on it, and a
    process whose connections lost their locks looks gone to the others, one of which
    then deletes the write-ahead log the first is still writing to (its commits vanish).

    Raises:
        StorageFault: The existing file is empty, foreign or truncated.
    """
    key = str(path.resolve())
    with _prepared_lock:
        if key in _prepared:
            return
        _prepared.add(key)
    if path.exists():
        try:
            check_sqlite_file(path)
        except StorageFault:
            with _prepared_lock:
                _prepared.discard(key)
            raise
        return
    private_dir(path.parent)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.new")
    touch_private(tmp)
    try:
        conn = sqlite3.connect(str(tmp))
        try:
            conn.execute(f"PRAGMA page_size={SQLITE_PAGE_SIZE}")
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(SAVER_WRITES_TABLE)
            conn.commit()
        finally:
            conn.close()
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass  # another process created it first: theirs is as good
    finally:
        tmp.unlink(missing_ok=True)


def fault_of(storage: Storage, exc: BaseException) -> StorageFault | None:
    """`exc` as a one-line storage fault naming this storage's file, or None."""
    where = str(storage.sqlite_path) if storage.is_sqlite else storage.shown_url
    fault = storage_fault(exc, where, SQLITE_BUSY_TIMEOUT_MS / 1000)
    return None if fault is None else StorageFault(storage.redact(str(fault)))


def engine_for(storage: Storage) -> Engine:
    """The process-wide engine for this storage, created (with tables) on first use."""
    with _engines_lock:
        engine = _engines.get(storage.url)
        if engine is not None:
            return engine
        if storage.is_sqlite:
            prepare_sqlite_file(storage.sqlite_path)
            engine = create_engine(
                storage.url,
                connect_args={"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_MS / 1000},
            )
            event.listen(engine, "connect", _tune_sqlite)
        else:
            engine = create_engine(storage.url, pool_pre_ping=True, pool_size=5, max_overflow=10)
        _ensure_schema(engine)
        _engines[storage.url] = engine
        return engine


schema_marks = Table(
    "contreact_schema",
    metadata,
    Column("fingerprint", String(64), primary_key=True),
)
"""The fingerprint of the table definitions the database was last brought up to."""


def schema_fingerprint() -> str:
    """A hash of every contreact table's name, columns (name, type) and indexes."""
    digest = hashlib.sha256()
    for table in metadata.sorted_tables:
        digest.update(f"table {table.name}\n".encode())
        for column in table.columns:
            digest.update(f"{column.name} {column.type!r} {column.nullable}\n".encode())
        for index in sorted(table.indexes, key=lambda i: str(i.name)):
            digest.update(f"index {index.name}\n".encode())
    return digest.hexdigest()


def _ensure_schema(engine: Engine) -> None:
    """Create or update the tables, unless the database says it is up to date.

    Inspecting every table costs a round trip per table and column list (a third of a
    second on PostgreSQL, paid by every command and every resume), so a database that
    already carries this version's fingerprint is trusted and left alone.
    """
    fingerprint = schema_fingerprint()
    try:
        with engine.connect() as conn:
            marked = conn.execute(
                select(schema_marks.c.fingerprint).where(schema_marks.c.fingerprint == fingerprint)
            ).first()
        if marked is not None:
            return
    except DBAPIError:
        pass  # a new database, or one made before the fingerprint existed
    metadata.create_all(engine)
    _add_missing_columns(engine)
    try:
        with engine.begin() as conn:
            conn.execute(delete(schema_marks))
            conn.execute(insert(schema_marks).values(fingerprint=fingerprint))
    except DBAPIError:
        pass  # another process marked it at the same moment


def _add_missing_columns(engine: Engine) -> None:
    """Bring tables made by an older contreact up to date (new columns only ever get added).

    Every column added after a release is nullable or has a server default, so adding it
    to an existing table is safe and keeps the rows.
    """
    existing = inspect(engine)
    for table in metadata.sorted_tables:
        if not existing.has_table(table.name):
            continue
        present = {c["name"] for c in existing.get_columns(table.name)}
        for column in table.columns:
            if column.name in present:
                continue
            kind = column.type.compile(engine.dialect)
            default = ""
            if column.server_default is not None:
                default = f" DEFAULT '{column.server_default.arg}'"  # type: ignore[attr-defined]
            elif not column.nullable:
                default = " DEFAULT ''"
            with engine.begin() as conn:
                conn.execute(
                    text(f"ALTER TABLE {table.name} ADD COLUMN {column.name} {kind}{default}")
                )


def dispose_engines() -> None:
    """Close every cached engine (tests and forked processes)."""
    with _engines_lock:
        for engine in _engines.values():
            engine.dispose()
        _engines.clear()


class Tx(Protocol):
    """Where a statement of a side effect's transaction runs (see `transaction`).

    A SQLAlchemy `Connection` in a transaction is one; so is the held connection of a
    driving thread. `Prepared` statements need nothing more than these two attributes.
    """

    @property
    def dialect(self) -> Dialect:
        """The database's dialect (its name picks the compiled SQL)."""
        ...

    @property
    def connection(self) -> Any:
        """The DBAPI connection (sqlite3 or psycopg, behind SQLAlchemy's pool proxy)."""
        ...


@dataclass(frozen=True)
class _HeldTx:
    dialect: Dialect
    connection: Any


PING_AFTER_IDLE_S = 1.0
"""A held PostgreSQL connection idle longer than this is pinged before its next
transaction (what `pool_pre_ping` does at every checkout): a server restarted during a
long model call is noticed before the call's result has to be recorded. Back-to-back
transactions (a fast model) skip the round trip."""


class _Held:
    """One thread's connection for its side-effect transactions, checked out once."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.conn: Any = None
        self.used = 0.0
        self.busy = False
        """In a transaction: a nested one (an event logged while an effect fails) takes
        a connection of its own, as it always did, instead of committing this one's."""

    def _checked_out(self) -> Any:
        conn = self.conn
        if (
            conn is not None
            and self.engine.dialect.name != "sqlite"
            and time.monotonic() - self.used > PING_AFTER_IDLE_S
        ):
            try:
                self.engine.dialect.do_ping(conn.dbapi_connection)
            except Exception:
                self.drop(invalidate=True)
                conn = None
        if conn is None:
            conn = self.conn = self.engine.raw_connection()
        return conn

    @contextmanager
    def transaction(self) -> Iterator[Tx]:
        conn = self._checked_out()
        self.busy = True
        try:
            yield _HeldTx(self.engine.dialect, conn)
            conn.commit()
        except BaseException:
            try:
                conn.rollback()
            except Exception:
                self.drop(invalidate=True)
            raise
        finally:
            self.busy = False
            self.used = time.monotonic()

    def drop(self, *, invalidate: bool = False) -> None:
        """Give the connection back to the pool (or discard it, when it is broken)."""
        conn, self.conn = self.conn, None
        if conn is None:
            return
        try:
            if invalidate:
                conn.invalidate()
            else:
                conn.close()
        except Exception:
            pass  # a broken connection cannot be returned; the pool replaces it


_held = threading.local()


@contextmanager
def held_connection(engine: Engine) -> Iterator[None]:
    """Run this thread's side-effect transactions on `engine` on one connection meanwhile.

    A run's driver makes two or three small transactions per model call (the journal
    record with its events, the memory change); going through `Engine.begin` each time
    (pool checkout, transaction object, events, return, and on PostgreSQL a ping) cost
    more than the statements. Only the thread that enters the block uses the connection,
    and it is back in the pool when the block ends; other threads (Studio's workers)
    keep using `Engine.begin`.
    """
    held: dict[Engine, _Held] = _held.__dict__.setdefault("by_engine", {})
    if engine in held:
        yield
        return
    held[engine] = _Held(engine)
    try:
        yield
    finally:
        held.pop(engine).drop()


def _free_held(engine: Engine) -> _Held | None:
    """This thread's held connection to `engine`, unless there is none or it is in use."""
    held: _Held | None = getattr(_held, "by_engine", {}).get(engine)
    return None if held is None or held.busy else held


@contextmanager
def reading(engine: Engine) -> Iterator[Tx]:
    """A connection for a few reads, with nothing left open after them.

    This thread's held connection (see `held_connection`), else one from the pool.
    """
    held = _free_held(engine)
    if held is None:
        with engine.connect() as conn:
            yield conn
        return
    # Each read its own transaction on PostgreSQL: no BEGIN and COMMIT round trips.
    with held.transaction() as tx, autocommit(tx):
        yield tx


@contextmanager
def autocommit(tx: Tx) -> Iterator[None]:
    """Let each statement of the block commit on its own, if nothing has run yet in `tx`.

    psycopg sends BEGIN before a transaction's first statement and COMMIT at its end, each
    a round trip to the server, and on PostgreSQL round trips are what a side effect's
    bookkeeping costs. A transaction whose only statement is its record (a model call's,
    an event's) needs neither: alone, the statement is atomic. Only on a held PostgreSQL
    connection (see `held_connection`) in which the transaction has not begun; anywhere
    else (SQLite, a transaction holding a memory change, a pooled connection) the block
    runs in the transaction as before.
    """
    raw = None
    if isinstance(tx, _HeldTx) and tx.dialect.name == "postgresql":
        from psycopg.pq import TransactionStatus

        candidate = tx.connection.dbapi_connection
        if candidate.info.transaction_status == TransactionStatus.IDLE:
            raw = candidate
    if raw is None:
        yield
        return
    raw.autocommit = True
    try:
        yield
    finally:
        try:
            raw.autocommit = False
        except Exception:
            pass  # a broken connection: its transaction's rollback discards it


@contextmanager
def transaction(engine: Engine) -> Iterator[Tx]:
    """One transaction: committed when the block ends, rolled back if it raises.

    On this thread's held connection inside `held_connection`, else via `Engine.begin`.
    """
    held = _free_held(engine)
    if held is None:
        with engine.begin() as conn:
            yield conn
        return
    with held.transaction() as tx:
        yield tx


class Prepared:
    """A statement compiled once per dialect to DBAPI SQL, run on the raw connection.

    Every step of a run reads or writes a few rows (its journal record, its events, a
    memory); SQLAlchemy's execution path (cache key, compiled-cache look-up, result
    wrappers) cost several times the query itself. A `Prepared` statement is the same
    SQL, compiled by SQLAlchemy from the same table definitions, with its parameters
    bound by name in the order the compiled text wants them. Only text and number
    columns pass through here, which both drivers take and return as they are (no
    SQLAlchemy type processing is skipped).
    """

    def __init__(self, build: Callable[[str], Any]) -> None:
        """`build(dialect_name)`: the statement (bound parameters named, values left out)."""
        self._build = build
        self._compiled: dict[str, tuple[str, tuple[str, ...]]] = {}

    def sql(self, dialect: str) -> tuple[str, tuple[str, ...]]:
        """The DBAPI SQL for `dialect` and the parameter names in binding order."""
        found = self._compiled.get(dialect)
        if found is None:
            if dialect == "sqlite":
                compiled_with: Any = sqlite.dialect(paramstyle="qmark")
            elif dialect == "postgresql":
                compiled_with = postgresql.psycopg.dialect(paramstyle="format")  # type: ignore[no-untyped-call]
            else:  # pragma: no cover - only the two supported backends reach here
                raise RuntimeError(f"unsupported database dialect {dialect}")
            compiled = self._build(dialect).compile(dialect=compiled_with)
            found = (str(compiled), tuple(compiled.positiontup or ()))
            self._compiled[dialect] = found
        return found

    @contextmanager
    def _cursor(self, conn: Tx, params: dict[str, Any]) -> Iterator[Any]:
        """The DBAPI cursor the statement ran on, in `conn`'s transaction; closed after."""
        sql, names = self.sql(conn.dialect.name)
        cursor = conn.connection.cursor()
        try:
            cursor.execute(sql, tuple(params[n] for n in names))
            yield cursor
        finally:
            cursor.close()

    def execute(self, conn: Tx, params: dict[str, Any]) -> None:
        """Run it for its effect."""
        with self._cursor(conn, params):
            pass

    def rows(self, conn: Tx, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        """Every row of the result."""
        with self._cursor(conn, params) as cursor:
            return [tuple(row) for row in cursor.fetchall()]

    def first(self, conn: Tx, params: dict[str, Any]) -> tuple[Any, ...] | None:
        """The first row, or None."""
        with self._cursor(conn, params) as cursor:
            row = cursor.fetchone()
            return None if row is None else tuple(row)

    def rowcount(self, conn: Tx, params: dict[str, Any]) -> int:
        """Rows the statement changed."""
        with self._cursor(conn, params) as cursor:
            return int(cursor.rowcount)

    def query(self, engine: Engine, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        """Every row, read with nothing left open (`reading`)."""
        with reading(engine) as conn:
            return self.rows(conn, params)


def named(table: Table, *columns: str) -> dict[str, Any]:
    """Bound parameters named after `columns`, typed as the table's columns."""
    return {c: bindparam(c, type_=table.c[c].type) for c in columns}


def _insert_builder(
    table: Table, columns: tuple[str, ...], update: tuple[str, ...] | None
) -> Callable[[str], Any]:
    def build(dialect: str) -> Any:
        stmt: Any = (sqlite if dialect == "sqlite" else postgresql).insert(table)
        stmt = stmt.values(named(table, *columns))
        if update is None:
            return stmt.on_conflict_do_nothing().returning(next(iter(table.primary_key.columns)))
        keys = [c for c in columns if c not in update]
        return stmt.on_conflict_do_update(
            index_elements=keys, set_={c: stmt.excluded[c] for c in update}
        )

    return build


@cache
def _insert_ignore(table: Table, columns: tuple[str, ...]) -> Prepared:
    return Prepared(_insert_builder(table, columns, None))


@cache
def _upsert(table: Table, columns: tuple[str, ...], update: tuple[str, ...]) -> Prepared:
    return Prepared(_insert_builder(table, columns, update))


def insert_ignore(conn: Tx, table: Table, values: dict[str, Any]) -> bool:
    """Insert a row unless its primary/unique key exists; True when the row is new.

    This is the idempotency primitive: every side effect's record is keyed by
    checkpointed counters, so a node re-run after a crash inserts nothing twice.
    (RETURNING, not rowcount: psycopg reports 1 for a conflicting DO NOTHING.)
    """
    return _insert_ignore(table, tuple(values)).first(conn, values) is not None


def upsert(conn: Tx, table: Table, values: dict[str, Any], keys: list[str]) -> None:
    """Insert or overwrite a row identified by `keys`."""
    update = tuple(k for k in values if k not in keys)
    _upsert(table, tuple(values), update).execute(conn, values)
