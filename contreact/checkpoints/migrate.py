"""Bringing a database up to contreact's tables: Alembic's upgrade, one process at a time.

Every process opens its database through `engines.engine_for`, which calls `bring_up_to_date`
once. A database at the newest revision costs one query (its version) and nothing else.
Otherwise the upgrade runs under a lock held for the whole of it, and the version is read
again under the lock: of processes starting together on a new database one creates the
tables and the others find them made. On PostgreSQL the lock is a transaction-scoped
advisory lock and the upgrade (Alembic's version table included) is one transaction of
PostgreSQL's transactional DDL; on SQLite it is an exclusive transaction on the file, in
which the upgrade runs whole.

A storage that must exist (`Storage.create` false: a command that only reads) and holds no
contreact tables is reported, and nothing is created or changed in it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Connection, Engine, inspect, text
from sqlalchemy.exc import DBAPIError

from contreact.checkpoints.migrations import HEAD, SCRIPT_LOCATION, VERSION_TABLE
from contreact.checkpoints.storage import Storage
from contreact.checkpoints.storage_faults import StorageFault
from contreact.errors import StorageNotFoundError

REGISTRY_TABLE = "contreact_runs"
"""The table whose presence makes a database contreact's (made by every release)."""

PG_LOCK = "SELECT pg_advisory_xact_lock(hashtext('contreact_schema'))"


def bring_up_to_date(engine: Engine, storage: Storage) -> None:
    """Upgrade the database to `HEAD` if it is not there (see the module doc).

    Raises:
        StorageNotFoundError: `storage` must exist and holds no contreact tables.
        StorageFault: A newer contreact brought the database to a revision this one lacks.
    """
    if _version(engine) == HEAD:
        return
    if not storage.create and not _is_contreact(engine):
        raise StorageNotFoundError(no_tables_line(storage))
    with _one_at_a_time(engine) as conn:
        version = _version_on(conn)
        if version == HEAD:
            return
        if version is None and not storage.create and not _has_registry(conn):
            raise StorageNotFoundError(no_tables_line(storage))
        _upgrade(conn, storage, version)
        conn.commit()


def no_tables_line(storage: Storage) -> str:
    """The line for a storage that holds no contreact tables."""
    if storage.is_sqlite:
        return (
            f"{storage.sqlite_path} holds no contreact tables (nothing was changed in it): "
            "name the folder or database a run wrote"
        )
    return (
        f"database {storage.shown_url} holds no contreact tables (nothing was created in it): "
        "check the URL, or start a run or a batch there"
    )


def _missing_table(exc: DBAPIError) -> bool:
    """Whether the statement failed because its table does not exist."""
    orig = exc.orig
    if getattr(orig, "sqlstate", None) == "42P01":  # PostgreSQL: undefined_table
        return True
    return "no such table" in str(orig)


def _version_on(conn: Connection) -> str | None:
    """The revision the database records (None: none, a database made before migrations)."""
    try:
        with conn.begin_nested() if conn.in_transaction() else _plain(conn):
            found = conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalar()
    except DBAPIError as exc:
        if not _missing_table(exc):
            raise
        return None
    return None if found is None else str(found)


@contextmanager
def _plain(conn: Connection) -> Iterator[None]:
    """A read outside any transaction of ours: rolled back after (it changed nothing)."""
    try:
        yield
    finally:
        conn.rollback()


def _version(engine: Engine) -> str | None:
    with engine.connect() as conn:
        return _version_on(conn)


def _has_registry(conn: Connection) -> bool:
    return inspect(conn).has_table(REGISTRY_TABLE)


def _is_contreact(engine: Engine) -> bool:
    """Whether the database holds contreact's tables (made by any release)."""
    with engine.connect() as conn:
        return _has_registry(conn)


@contextmanager
def _one_at_a_time(engine: Engine) -> Iterator[Connection]:
    """A connection in a transaction that no other process's upgrade runs beside."""
    with engine.connect() as conn:
        if engine.dialect.name == "postgresql":
            conn.execute(text(PG_LOCK))
        else:
            # Waits for another writer as long as the busy timeout says (`sqlite_file`).
            conn.exec_driver_sql("BEGIN EXCLUSIVE")
        try:
            yield conn
        finally:
            if conn.in_transaction():
                conn.rollback()


def _upgrade(conn: Connection, storage: Storage, version: str | None) -> None:
    """Alembic's upgrade to the newest revision, inside `conn`'s transaction."""
    from alembic import command
    from alembic.config import Config
    from alembic.util.exc import CommandError

    config = Config()
    config.set_main_option("script_location", SCRIPT_LOCATION)
    config.attributes["connection"] = conn
    try:
        command.upgrade(config, "head")
    except CommandError:
        raise StorageFault(
            f"database {storage.shown} is at schema revision {version}, which this contreact "
            "does not know: it was upgraded by a newer contreact; upgrade contreact to use it"
        ) from None
