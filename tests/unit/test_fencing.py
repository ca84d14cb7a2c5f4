"""The fence: once a run's lease passes on, the old holder's every write is refused.

A worker frozen past its lease (SIGSTOP) wakes up believing it still drives its run. The
database, not the worker, decides: each table a run writes checks the writer's token
against the run's lease inside the write. These tests write as the old and the new holder
through real PostgreSQL connections, the way a driving process does (the token in the
connection's options).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Engine, create_engine, insert, select, update

from contreact.checkpoints.engines import engine_for
from contreact.checkpoints.fencing import (
    LEASE_LOST_SQLSTATE,
    install_fences,
    lease_lost,
    release_lease,
    take_lease,
)
from contreact.checkpoints.registry import create_run
from contreact.checkpoints.saver import open_saver
from contreact.checkpoints.schema import events, journal, memories, runs
from support.backends import Backend


@pytest.fixture
def leased(postgres_backend: Backend) -> Iterator[tuple[Any, Engine, str]]:
    storage = postgres_backend.storage()
    with open_saver(storage):
        pass  # LangGraph's checkpoint tables
    engine = engine_for(storage)
    install_fences(engine)
    record = create_run(engine, "r1", model="m", host="h", config={})
    yield storage, engine, record.thread_id


def fenced(storage: Any, token: int) -> Engine:
    """An engine whose connections carry `token`, as a worker's driving process's do."""
    return create_engine(storage.url, connect_args={"options": f"-c contreact.fence={token}"})


def write_journal(engine: Engine, key: str) -> None:
    with engine.begin() as conn:
        conn.execute(insert(journal).values(run_id="r1", key=key, cycle=1, result="null"))


def refused(action: Any) -> str:
    with pytest.raises(Exception) as caught:
        action()
    said = lease_lost(caught.value)
    assert said is not None, f"not refused by the fence: {caught.value}"
    return said


def test_the_holder_writes_and_the_old_holder_is_refused_everywhere(leased: Any) -> None:
    storage, engine, thread_id = leased
    first = take_lease(engine, "r1", host="h")
    old = fenced(storage, first)
    write_journal(old, "k1")  # the holder writes

    second = take_lease(engine, "r1", host="h")
    new = fenced(storage, second)
    said = refused(lambda: write_journal(old, "k2"))
    assert f"lease {second}" in said and f"held {first}" in said

    def event() -> None:
        with old.begin() as conn:
            conn.execute(
                insert(events).values(
                    run_id="r1", key="e", cycle=1, event_type="X", timestamp="t", payload="{}"
                )
            )

    def memory() -> None:
        with old.begin() as conn:
            conn.execute(insert(memories).values(run_id="r1@b", key="k", value="v"))

    def registry() -> None:
        with old.begin() as conn:
            conn.execute(update(runs).where(runs.c.run_id == "r1").values(status="failed"))

    for action in (event, memory, registry):
        refused(action)
    write_journal(new, "k3")  # the new holder writes
    write_journal(engine, "k4")  # and so does an unfenced process (the CLI)
    with engine.connect() as conn:
        keys = set(conn.execute(select(journal.c.key).where(journal.c.run_id == "r1")).scalars())
        status = conn.execute(select(runs.c.status).where(runs.c.run_id == "r1")).scalar()
    assert keys == {"k1", "k3", "k4"} and status == "running"


def test_a_checkpoint_by_the_old_holder_is_refused(leased: Any) -> None:
    import psycopg

    storage, engine, thread_id = leased
    first = take_lease(engine, "r1", host="h")
    take_lease(engine, "r1", host="h")
    with psycopg.connect(storage.libpq_url, options=f"-c contreact.fence={first}") as conn:
        with pytest.raises(psycopg.Error) as caught:
            conn.execute(
                "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, checkpoint,"
                " metadata) VALUES (%s, '', 'c1', '{}', '{}')",
                (thread_id,),
            )
    assert caught.value.sqlstate == LEASE_LOST_SQLSTATE


def test_a_released_lease_still_refuses_its_predecessors(leased: Any) -> None:
    storage, engine, _ = leased
    first = take_lease(engine, "r1", host="h")
    second = take_lease(engine, "r1", host="h")
    release_lease(engine, "r1", second)
    refused(lambda: write_journal(fenced(storage, first), "k"))


def test_taking_a_lease_waits_for_the_old_holders_write_in_flight(leased: Any) -> None:
    storage, engine, _ = leased
    first = take_lease(engine, "r1", host="h")
    old = fenced(storage, first)
    taken = threading.Event()
    with old.begin() as conn:
        conn.execute(insert(journal).values(run_id="r1", key="k", cycle=1, result="null"))
        threading.Thread(
            target=lambda: (take_lease(engine, "r1", host="h"), taken.set()), daemon=True
        ).start()
        time.sleep(0.5)
        # The takeover cannot pass a write that began under the old lease...
        assert not taken.is_set()
    # ...and goes through once it committed: the write came before the takeover.
    assert taken.wait(5)
    with engine.connect() as conn:
        assert conn.execute(select(journal.c.key).where(journal.c.run_id == "r1")).scalar() == "k"


def test_a_worker_starting_beside_a_frozen_transaction_is_not_held_by_it(leased: Any) -> None:
    """Fences already in place are not put on again, so no table lock waits for a freeze."""
    storage, engine, _ = leased
    frozen = create_engine(storage.url)
    started = threading.Event()
    with frozen.begin() as conn:
        # A machine stopped inside a write: its transaction stays open, its row lock held.
        conn.execute(update(runs).where(runs.c.run_id == "r1").values(host="frozen"))

        def start() -> None:
            install_fences(engine_for(storage))
            started.set()

        threading.Thread(target=start, daemon=True).start()
        assert started.wait(10), "a new worker's start waited for the frozen transaction"
        conn.rollback()
    frozen.dispose()
