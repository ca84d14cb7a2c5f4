"""A SQLite file as contreact opens it: created whole, checked, and every connection tuned.

SQLite is the default backend, one file in the data directory that many processes (runs,
`status`, Studio) open at once. What that takes lives here: the pragmas every connection
gets, how long a writer waits for a lock, and the one-time creation or check of the file
before a process's first connection (see `prepare_sqlite_file` for why only once).
"""

from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path
from typing import Any

from contreact.checkpoints.private_files import private_dir, touch_private
from contreact.checkpoints.storage_faults import StorageFault, check_sqlite_file


def busy_timeout_ms() -> int:
    """How long a write waits for a SQLite file another process holds locked, in ms.

    Past it the write fails with one line naming the file; `CONTREACT_SQLITE_BUSY_TIMEOUT_MS`
    shortens it for tests. Read when a connection is made, not at import: a process forked
    from a server that imported this module still obeys the environment it was given.
    """
    return int(os.environ.get("CONTREACT_SQLITE_BUSY_TIMEOUT_MS") or 30_000)


WAL_KEPT_BYTES = 1 << 20
"""The most a write-ahead log keeps of its file once a checkpoint has emptied it
(`journal_size_limit`): without a limit SQLite reuses the file at the largest size it
ever reached, up to the 1,000 pages of its automatic checkpoint (8 MB here)."""


def sqlite_pragmas() -> tuple[str, ...]:
    """The pragmas of every SQLite connection contreact opens (SQLAlchemy, the savers).

    WAL lets readers (status, Studio) run beside a writer; the busy timeout turns short lock
    waits between concurrent runs into waits instead of errors; synchronous=NORMAL in WAL
    survives kill -9 (only power loss can drop the tail); the size limit trims a log that a
    checkpoint emptied (see `WAL_KEPT_BYTES`).
    """
    return (
        "PRAGMA journal_mode=WAL",
        f"PRAGMA busy_timeout={busy_timeout_ms()}",
        "PRAGMA synchronous=NORMAL",
        f"PRAGMA journal_size_limit={WAL_KEPT_BYTES}",
    )


CLOSING_BUSY_TIMEOUT_MS = 200
"""How long the closing checkpoint waits for another process's reader or writer before
it leaves the log to that process (whose own close folds it in)."""


def truncate_wal(conn: sqlite3.Connection) -> bool:
    """Fold the write-ahead log into the database file and empty it; True if it could.

    SQLite does this by itself when the last connection to the file closes, but not when
    another process (a second run, `batch --status`, Studio) still has the file open:
    then a finished run left its log behind at whatever size it had grown to. Called on
    a connection about to close, so its busy timeout is shortened for good: a checkpoint
    another process blocks is that process's to finish, not worth a wait at exit.
    """
    try:
        conn.execute(f"PRAGMA busy_timeout={CLOSING_BUSY_TIMEOUT_MS}")
        busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    except sqlite3.Error:
        return False
    return bool(busy == 0)


def tune_sqlite(dbapi_conn: Any, _record: Any) -> None:
    """Run `sqlite_pragmas()` on a new DBAPI connection (a SQLAlchemy `connect` listener)."""
    cur = dbapi_conn.cursor()
    for pragma in sqlite_pragmas():
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


def holds_contreact_tables(path: Path) -> bool:
    """Whether the SQLite file at `path` holds contreact's run registry, read without writing.

    Opened read-only: SQLAlchemy's connections switch a file to WAL as they connect, which
    would change a file that turns out not to be contreact's.
    """
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=5)
    except sqlite3.Error:
        return True  # let the engine's own connection say what is wrong with the file
    try:
        found = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'contreact_runs'"
        ).fetchone()
    except sqlite3.Error:
        return True
    finally:
        conn.close()
    return found is not None
