"""A driving thread's side-effect transactions run on one held connection.

The journal records every side effect in its own small transaction, two or three per model
call; going through `Engine.begin` each time (pool checkout and return, and on PostgreSQL
a ping) cost more than the statements. Inside `held_connection` the thread that entered
keeps one connection for them. These tests pin what must not change with it: each
transaction still commits or rolls back as a whole, a nested one (an event logged while an
effect fails) is still separate, other threads are untouched, and a connection the
server dropped is replaced instead of failing the run.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy import Engine, event, select, text

from contreact.checkpoints import statements, transactions
from contreact.checkpoints.engines import engine_for
from contreact.checkpoints.schema import journal
from contreact.checkpoints.statements import insert_ignore
from contreact.checkpoints.transactions import held_connection, transaction
from support.backends import Backend


class Checkouts:
    """Counts connections taken from the engine's pool (`this_thread`: by this thread only).

    A driven run's heartbeat beats once a second on a connection of its own thread; counting
    the driving thread's records must not depend on when a beat lands.
    """

    def __init__(self, engine: Engine, *, this_thread: bool = False) -> None:
        self.count = 0
        self.thread = threading.get_ident() if this_thread else None
        event.listen(engine.pool, "checkout", self._seen)

    def _seen(self, *_: Any) -> None:
        if self.thread is None or threading.get_ident() == self.thread:
            self.count += 1


def record(tx: Any, key: str) -> None:
    assert insert_ignore(tx, journal, {"run_id": "held", "key": key, "cycle": 1, "result": "1"})


def recorded(engine: Engine) -> set[str]:
    with engine.connect() as conn:
        return set(conn.execute(select(journal.c.key).where(journal.c.run_id == "held")).scalars())


def test_the_thread_in_the_block_commits_every_transaction_on_one_connection(
    backend: Backend,
) -> None:
    engine = engine_for(backend.storage())
    checkouts = Checkouts(engine)
    with held_connection(engine):
        for i in range(5):
            with transaction(engine) as tx:
                record(tx, f"k{i}")
        assert checkouts.count == 1
        # Committed at the end of each block, not when the connection goes back.
        assert recorded(engine) == {f"k{i}" for i in range(5)}
    before = checkouts.count
    with transaction(engine) as tx:
        record(tx, "after")
    assert checkouts.count == before + 1, "outside the block every transaction checks out"


def test_a_transaction_that_raises_leaves_nothing_and_the_next_one_works(
    backend: Backend,
) -> None:
    engine = engine_for(backend.storage())
    with held_connection(engine):
        with pytest.raises(RuntimeError):
            with transaction(engine) as tx:
                record(tx, "lost")
                raise RuntimeError("the effect failed after its record was written")
        with transaction(engine) as tx:
            record(tx, "kept")
    assert recorded(engine) == {"kept"}


def test_a_nested_transaction_commits_on_its_own(backend: Backend) -> None:
    """A model call that fails logs its ERROR in a transaction of its own, then raises."""
    engine = engine_for(backend.storage())
    with held_connection(engine):
        with pytest.raises(RuntimeError):
            with transaction(engine):
                with transaction(engine) as inner:
                    record(inner, "error-event")
                raise RuntimeError("model unreachable")
    assert recorded(engine) == {"error-event"}


def test_postgres_a_nested_transaction_does_not_commit_the_outer_ones_work(
    postgres_backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the held connection, the inner commit would make the outer's partial work stick.

    (SQLite allows one writer: there the outer transaction writes nothing before it.)
    """
    monkeypatch.setattr(transactions, "PING_AFTER_IDLE_S", 3600.0)  # back-to-back, as in a run
    engine = engine_for(postgres_backend.storage())
    with held_connection(engine):
        with pytest.raises(RuntimeError):
            with transaction(engine) as outer:
                record(outer, "outer-partial")
                with transaction(engine) as inner:
                    record(inner, "error-event")
                raise RuntimeError("the effect failed")
    assert recorded(engine) == {"error-event"}


def test_other_threads_use_connections_of_their_own(backend: Backend) -> None:
    engine = engine_for(backend.storage())
    checkouts = Checkouts(engine)
    errors: list[BaseException] = []

    def elsewhere() -> None:
        try:
            with transaction(engine) as tx:
                record(tx, "other-thread")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    with held_connection(engine):
        with transaction(engine) as tx:
            record(tx, "driver")
        worker = threading.Thread(target=elsewhere)
        worker.start()
        worker.join()
        assert checkouts.count == 2
    assert not errors
    assert recorded(engine) == {"driver", "other-thread"}


@contextmanager
def dropped_while_idle(
    backend: Backend, monkeypatch: pytest.MonkeyPatch, ping_after_s: float
) -> Iterator[Engine]:
    """Inside a held block: one record, then the server drops every connection but ours.

    As a server restart during a long model call does.
    """
    engine = engine_for(backend.storage())
    monkeypatch.setattr(transactions, "PING_AFTER_IDLE_S", ping_after_s)
    with held_connection(engine):
        with transaction(engine) as tx:
            record(tx, "before")
        with engine.connect() as conn:
            conn.exec_driver_sql(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        yield engine


def test_postgres_a_connection_the_server_dropped_while_idle_is_replaced(
    postgres_backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    with dropped_while_idle(postgres_backend, monkeypatch, ping_after_s=0.0) as engine:
        with transaction(engine) as tx:
            record(tx, "after")
    assert recorded(engine) == {"before", "after"}


def test_postgres_without_the_ping_a_dropped_connection_fails_once_then_recovers(
    postgres_backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ping is what saves the record; a failed transaction does not poison the next."""
    import psycopg

    with dropped_while_idle(postgres_backend, monkeypatch, ping_after_s=3600.0) as engine:
        # Statements run on the raw cursor: the driver's own error, as for any fault.
        with pytest.raises(psycopg.OperationalError):
            with transaction(engine) as tx:
                record(tx, "lost")
        with transaction(engine) as tx:
            record(tx, "after")
    assert recorded(engine) == {"before", "after"}


def test_a_run_driven_by_the_runner_records_its_effects_on_the_held_connection(
    sqlite_backend: Backend,
) -> None:
    """Pool checkouts of a run do not grow with its side effects (3 cycles: 9+ records)."""
    from contreact.checkpoints.journal import Ledger
    from contreact.config import parse_config
    from contreact.engine.runner import start_run
    from contreact.stub import StubServer

    storage = sqlite_backend.storage()
    engine = engine_for(storage)
    checkouts = Checkouts(engine, this_thread=True)
    records = taken = 0
    commit = Ledger.commit

    def counted(self: Ledger, *args: Any, **kwargs: Any) -> Any:
        nonlocal records, taken
        before = checkouts.count
        records += 1
        try:
            return commit(self, *args, **kwargs)
        finally:
            taken += checkouts.count - before

    with pytest.MonkeyPatch.context() as patch, StubServer().start() as server:
        patch.setattr(Ledger, "commit", counted)
        config = parse_config(
            {"run_id": "held", "model": "stub-model", "cycles": 3, "ollama": {"host": server.url}},
            "test",
        )
        outcome = start_run(config, storage)
    assert outcome.status == "completed", outcome.reason
    assert records >= 9
    # The held connection is checked out once (by the first read or record), then reused.
    assert taken <= 1, f"{taken} of {records} records checked a connection out"


# --- PostgreSQL: round trips --------------------------------------------------------------
# On PostgreSQL a side effect's bookkeeping costs its round trips to the server: psycopg
# sends BEGIN before a transaction's first statement and COMMIT at its end, each one. A
# record whose effect ran no statement (a model call, an event) is one statement alone.


class RoundTrips:
    """Counts what psycopg sends: statements, and BEGIN / COMMIT / ROLLBACK commands."""

    def __init__(self, patch: pytest.MonkeyPatch) -> None:
        import psycopg
        from psycopg._connection_base import BaseConnection

        self.sent: list[str] = []
        execute, command = psycopg.Cursor.execute, BaseConnection._exec_command

        def counted_execute(cursor: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
            self.sent.append(str(query).split()[0].upper())
            return execute(cursor, query, *args, **kwargs)

        def counted_command(conn: Any, cmd: Any, *args: Any, **kwargs: Any) -> Any:
            self.sent.append(bytes(cmd).decode().split()[0].upper())
            return command(conn, cmd, *args, **kwargs)

        patch.setattr(psycopg.Cursor, "execute", counted_execute)
        patch.setattr(BaseConnection, "_exec_command", counted_command)


def back_to_back(backend: Backend, patch: pytest.MonkeyPatch) -> tuple[Any, Engine]:
    """The backend's storage and engine, transactions following each other as in a run."""
    patch.setattr(transactions, "PING_AFTER_IDLE_S", 3600.0)  # no ping between them
    storage = backend.storage()
    return storage, engine_for(storage)


def cycle_start(key: str) -> Any:
    from contreact.checkpoints.event_schema import CycleStart, Event

    return Event(cycle=1, key=key, data=CycleStart(opening="hello"))


def stored_events(engine: Engine) -> list[str]:
    from contreact.checkpoints.schema import events

    with engine.connect() as conn:
        return list(conn.execute(select(events.c.key).where(events.c.run_id == "held")).scalars())


def test_postgres_a_record_whose_effect_ran_no_statement_is_one_round_trip(
    postgres_backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    from contreact.checkpoints.journal import Ledger

    storage, engine = back_to_back(postgres_backend, monkeypatch)
    ledger = Ledger(storage, "held")
    with held_connection(engine):
        ledger.emit(cycle_start("warm-up"))  # the checkout and its first statements
        trips = RoundTrips(monkeypatch)
        result = ledger.commit("c1:s0:llm", 1, lambda tx: ("the answer", [cycle_start("c1:s0")]))
        assert result == "the answer"
        assert trips.sent == ["WITH"], "one statement: the record and its event, no BEGIN/COMMIT"
        trips.sent.clear()
        ledger.emit(cycle_start("c1:start"))
        assert trips.sent == ["INSERT"]
    # Durable: another connection sees both records and all the events.
    assert recorded(engine) == {"c1:s0:llm"}
    assert stored_events(engine) == ["warm-up", "c1:s0", "c1:start"]


def test_postgres_a_record_commits_with_the_memory_change_its_effect_made(
    postgres_backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An effect that wrote in the transaction keeps it: its record cannot commit alone."""
    from contreact.checkpoints import journal as journal_module
    from contreact.checkpoints.journal import Ledger
    from contreact.checkpoints.schema import memories
    from contreact.checkpoints.statements import upsert

    storage, engine = back_to_back(postgres_backend, monkeypatch)
    ledger = Ledger(storage, "held")

    def write_memory(value: str) -> Any:
        def act(tx: Any) -> tuple[str, list[Any]]:
            upsert(tx, memories, {"run_id": "held", "key": "k", "value": value}, ["run_id", "key"])
            return "Stored 'k'.", [cycle_start(f"event-{value}")]

        return act

    def broken(with_record: bool, events_n: int) -> Any:
        return statements.Prepared(
            lambda _: text("INSERT INTO no_such_table VALUES (1) RETURNING 1")
        )

    with held_connection(engine):
        ledger.emit(cycle_start("warm-up"))  # the checkout and its first statements
        trips = RoundTrips(monkeypatch)
        ledger.commit("c1:s0:t0", 1, write_memory("first"))
        # (psycopg sends BEGIN from inside the first statement's execute, counted after it.)
        assert sorted(trips.sent) == ["BEGIN", "COMMIT", "INSERT", "WITH"]
        monkeypatch.setattr(journal_module, "_pg_record", broken)
        with pytest.raises(Exception, match="no_such_table"):
            ledger.commit("c1:s1:t0", 1, write_memory("second"))
    with engine.connect() as conn:
        assert conn.execute(select(memories.c.value)).scalars().all() == ["first"]
    assert recorded(engine) == {"c1:s0:t0"}


def test_postgres_reads_open_no_transaction_and_the_pool_gets_its_connection_back_as_it_was(
    postgres_backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    from psycopg.pq import TransactionStatus

    from contreact.checkpoints.journal import Ledger
    from contreact.checkpoints.transactions import reading

    storage, engine = back_to_back(postgres_backend, monkeypatch)
    with held_connection(engine):
        with transaction(engine) as tx:
            record(tx, "before")
        trips = RoundTrips(monkeypatch)
        assert Ledger(storage, "held").recall("before") == 1
        assert trips.sent == ["SELECT"], "a read is its own transaction: no BEGIN, no COMMIT"
        with reading(engine) as tx:
            raw = tx.connection.dbapi_connection
        assert raw.info.transaction_status == TransactionStatus.IDLE
        assert raw.autocommit is False
        # A transaction after reads is still one: it rolls back whole.
        with pytest.raises(RuntimeError):
            with transaction(engine) as tx:
                record(tx, "lost")
                raise RuntimeError("the effect failed")
    pooled = engine.raw_connection()
    try:
        assert pooled.dbapi_connection.autocommit is False  # type: ignore[union-attr]
    finally:
        pooled.close()
    assert recorded(engine) == {"before"}


def test_a_record_written_twice_stores_it_once_and_mirrors_its_events_once(
    backend: Backend,
) -> None:
    from contreact.checkpoints.journal import write_record

    engine = engine_for(backend.storage())
    row = {"run_id": "held", "key": "c1:s0:llm", "cycle": 1, "result": '"x"'}
    batch = [cycle_start("c1:s0"), cycle_start("c1:s0:extra")]
    with held_connection(engine):
        with transaction(engine) as tx:
            first = write_record(tx, "held", row, batch)
        with transaction(engine) as tx:
            again = write_record(tx, "held", row, [*batch, cycle_start("c1:s0:late")])
    assert [line.count('"CYCLE_START"') for line in first] == [1, 1]
    assert len(again) == 1 and '"late"' not in again[0] and "hello" in again[0]
    assert recorded(engine) == {"c1:s0:llm"}
    assert stored_events(engine) == ["c1:s0", "c1:s0:extra", "c1:s0:late"]
