"""One SQLAlchemy engine per storage URL, made on first use with its tables in place.

Every part of contreact that touches the database (the runner, the journal, the CLI's
commands, analysis) asks `engine_for` and gets the same process-wide engine, so a
process holds one connection pool per database and checks the schema once
(`migrate.bring_up_to_date`). A storage that must exist and does not is reported before
anything is created; a database error becomes one line naming the file or server here
too (`fault_of`).
"""

from __future__ import annotations

import threading

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.exc import DBAPIError

from contreact.checkpoints.locations import DB_FILENAME
from contreact.checkpoints.migrate import bring_up_to_date, no_tables_line
from contreact.checkpoints.sqlite_file import (
    busy_timeout_ms,
    holds_contreact_tables,
    prepare_sqlite_file,
    truncate_wal,
    tune_sqlite,
)
from contreact.checkpoints.storage import Storage
from contreact.checkpoints.storage_faults import StorageFault, storage_fault
from contreact.errors import StorageNotFoundError

_engines: dict[str, Engine] = {}
_engines_lock = threading.Lock()


def fault_of(storage: Storage, exc: BaseException) -> StorageFault | None:
    """`exc` as a one-line storage fault naming this storage's file, or None."""
    where = str(storage.sqlite_path) if storage.is_sqlite else storage.shown_url
    fault = storage_fault(exc, where, busy_timeout_ms() / 1000)
    return None if fault is None else StorageFault(storage.redact(str(fault)))


def engine_for(storage: Storage) -> Engine:
    """The process-wide engine for this storage, its tables brought up to date on first use.

    Raises:
        StorageNotFoundError: The storage must exist (`Storage.create` false) and does not;
            nothing was created.
        StorageFault: The database cannot be reached or used (one line).
    """
    with _engines_lock:
        engine = _engines.get(storage.url)
        if engine is not None:
            return engine
        if storage.is_sqlite:
            path = storage.sqlite_path
            if not storage.create and not path.is_file():
                raise StorageNotFoundError(missing_file_line(storage))
            prepare_sqlite_file(path)
            if not storage.create and not holds_contreact_tables(path):
                raise StorageNotFoundError(no_tables_line(storage))
            engine = create_engine(
                storage.url,
                connect_args={"check_same_thread": False, "timeout": busy_timeout_ms() / 1000},
            )
            event.listen(engine, "connect", tune_sqlite)
        else:
            engine = create_engine(storage.url, pool_pre_ping=True, pool_size=5, max_overflow=10)
        try:
            bring_up_to_date(engine, storage)
        except DBAPIError as exc:
            engine.dispose()
            fault = fault_of(storage, exc)
            if fault is None:
                raise
            raise fault from None
        except BaseException:
            engine.dispose()
            raise
        _engines[storage.url] = engine
        return engine


def missing_file_line(storage: Storage) -> str:
    """The line for a SQLite storage whose file is not there."""
    path = storage.sqlite_path
    if path.name != DB_FILENAME:
        where = f"at {path}"
    elif path.parent.is_dir():
        where = f"in {path.parent} (it has no {DB_FILENAME})"
    else:
        where = f"in {path.parent} (no such folder)"
    return (
        f"no contreact database {where}; nothing was created: name the folder or file a run "
        "wrote, or start a run there with `contreact run CONFIG`"
    )


def dispose_engines() -> None:
    """Close every cached engine, a SQLite file's write-ahead log folded in and emptied first.

    The CLI calls this when a command ends (`cli.app.guarded`), so no command leaves a
    log behind even while another process holds the file open (see `truncate_wal`).
    """
    with _engines_lock:
        for engine in _engines.values():
            if engine.dialect.name == "sqlite":
                _truncate_wal(engine)
            engine.dispose()
        _engines.clear()


def _truncate_wal(engine: Engine) -> None:
    try:
        raw = engine.raw_connection()
    except Exception:  # noqa: BLE001 - a file that cannot be opened has no log to fold in
        return
    try:
        truncate_wal(raw.driver_connection)  # type: ignore[arg-type]
    finally:
        raw.close()
