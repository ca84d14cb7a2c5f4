"""Transactions for side effects and their records, on a connection a driving thread holds.

A side effect and its journal record (with its events) commit in one transaction: that is
what makes crash + resume exactly-once. A run makes two or three such small transactions
per model call, so their cost matters: a driving thread keeps one connection for them
(`held_connection`), and on PostgreSQL a lone record commits without BEGIN and COMMIT
round trips (`autocommit`). `Tx` is what a statement of such a transaction runs on.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy import Engine
from sqlalchemy.engine import Dialect


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
