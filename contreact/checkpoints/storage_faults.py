"""Database and disk faults, told in one line that names the file and the cause.

A locked SQLite file, a full or read-only disk, a damaged database: the driver's own
exceptions say `(sqlite3.OperationalError) database is locked [SQL: UPDATE ...]` over
several lines, or `disk I/O error` without a file name. What a person needs is which
file, what is wrong with it, and that nothing committed is lost. This module turns
those exceptions into a `StorageFault` whose message is that one line, and checks a
SQLite file before it is opened, so that a truncated or overwritten database is
reported instead of being taken for an empty one and silently recreated.
"""

from __future__ import annotations

import errno
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path

SQLITE_MAGIC = b"SQLite format 3\x00"


class StorageFault(Exception):
    """The database or the data directory cannot be used now; the message is one line."""


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """`exc`, the driver errors SQLAlchemy wraps, and the exceptions it was raised from."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        item = todo.pop(0)
        if item is None or id(item) in seen:
            continue
        seen.add(id(item))
        yield item
        orig = getattr(item, "orig", None)
        todo += [orig if isinstance(orig, BaseException) else None]
        todo += [item.__cause__, item.__context__]


def _sqlite_cause(message: str, where: str, busy_s: float) -> str | None:
    text = message.lower()
    if "locked" in text or "busy" in text:
        return f"database {where} is locked by another process (waited {busy_s:g} s)"
    if "full" in text:
        return f"disk full writing database {where}"
    if "readonly" in text or "read-only" in text:
        return f"database {where} is read-only (file or file system)"
    if "not a database" in text or "malformed" in text or "corrupt" in text:
        return f"database {where} is damaged ({message})"
    if "disk i/o error" in text:
        return f"disk I/O error on database {where} (a full, read-only or failing disk)"
    if "unable to open" in text:
        return f"cannot open database {where} (missing folder or no permission)"
    return None


_OS_CAUSES = {
    errno.ENOSPC: "disk full writing",
    errno.EDQUOT: "disk quota exceeded writing",
    errno.EFBIG: "file size limit reached writing",
    errno.EROFS: "read-only file system: cannot write",
    errno.EACCES: "no permission to write",
    errno.EPERM: "no permission to write",
    errno.EIO: "disk I/O error writing",
}


def storage_fault(exc: BaseException, where: str, busy_s: float) -> StorageFault | None:
    """The one-line fault `exc` is (or was raised from), or None if it is not a storage fault.

    Args:
        exc: Any exception.
        where: The database as people should see it (the SQLite path, or the URL with
            its password hidden).
        busy_s: How long a locked SQLite file was waited for.
    """
    for item in _chain(exc):
        if isinstance(item, StorageFault):
            return item
        if isinstance(item, sqlite3.Error):
            cause = _sqlite_cause(str(item), where, busy_s)
            if cause:
                return StorageFault(cause)
        if isinstance(item, OSError) and item.errno in _OS_CAUSES:
            name = item.filename or where
            return StorageFault(f"{_OS_CAUSES[item.errno]} {name} ({item.strerror})")
        if _is_postgres_connection_error(item):
            return StorageFault(
                f"database {where} cannot be reached: {_postgres_reason(item)}; check that "
                "PostgreSQL is running there and that the URL (--storage, CONTREACT_DB_URL or "
                "storage.url) names the right host, database and user"
            )
        sqlstate = getattr(item, "sqlstate", None)
        if isinstance(sqlstate, str) and sqlstate.startswith("53"):
            # PostgreSQL's class 53: insufficient resources (disk full, out of memory).
            first = str(item).splitlines()[0] if str(item) else sqlstate
            return StorageFault(f"database {where} is out of resources: {first}")
    return None


def _is_postgres_connection_error(exc: BaseException) -> bool:
    """Whether psycopg could not connect, or lost the connection (no server, no database, no role).

    Told by name: importing psycopg here would load it for SQLite users too.
    """
    kind = type(exc)
    if not kind.__module__.startswith("psycopg") or kind.__name__ != "OperationalError":
        return False
    sqlstate = getattr(exc, "sqlstate", None)
    # None: the connection never came up; 08 connection exception; 28 bad password or
    # role; 3D no such database; 57P0x the server shut down.
    return sqlstate is None or sqlstate[:2] in ("08", "28", "3D") or sqlstate[:4] == "57P0"


def _postgres_reason(exc: BaseException) -> str:
    """The cause libpq gives, without its `connection to server at ... failed:` preamble."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = lines[0] if lines else "no detail"
    text = re.sub(r"^connection failed:\s*", "", text)
    text = re.sub(r"^connection to server (at|on) .*? failed:\s*", "", text)
    return re.sub(r"^FATAL:\s*", "", text) or "no detail"


def check_sqlite_file(path: Path) -> None:
    """Raise `StorageFault` if the SQLite file at `path` is empty, foreign or truncated.

    contreact creates its database with a valid header (see `checkpoints.sqlite_file`), so an
    existing empty file was emptied; SQLite itself would take it for a new database and
    contreact would recreate its tables in it, hiding that every run was lost. The
    length check is the header's own (page count x page size, valid when its
    version-valid-for number matches the change counter); it is skipped while a
    write-ahead log exists, which may hold pages the main file does not have yet.

    Raises:
        StorageFault: Naming the file and what is wrong with it.
    """
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return
    advice = "nothing was changed; restore it from a backup or move it aside to start afresh"
    if size == 0:
        raise StorageFault(f"database {path} is empty (0 bytes): it was truncated; {advice}")
    with path.open("rb") as fh:
        header = fh.read(100)
    if len(header) < 100 or not header.startswith(SQLITE_MAGIC):
        raise StorageFault(f"database {path} is not a SQLite database (damaged); {advice}")
    wal = path.with_name(path.name + "-wal")
    if wal.exists() and wal.stat().st_size > 0:
        return
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    header_valid = pages > 0 and header[24:28] == header[92:96]
    if header_valid and pages * page_size > size:
        raise StorageFault(
            f"database {path} is truncated ({size} bytes, its header says "
            f"{pages * page_size}); {advice}"
        )
