"""A study's runs as jobs on procrastinate, on the PostgreSQL the runs already share.

Why a queue: one driver machine is a single point of failure, and a lab has several. Any
number of `contreact worker` processes (and `contreact batch` itself) take runs from the
queue; a run is one job (`lock` and `queueing_lock` are its run id, so enqueueing again
adds nothing and two jobs of one run never run at once). Why procrastinate: it is a job
queue on PostgreSQL, where the runs are, so a study needs no other service; its workers
beat (`HEARTBEAT_S`) and a job whose worker stopped beating for `LEASE_S` is found with
`get_stalled_jobs` and retried, which is how a killed machine's runs move on.

A queue delivers a run at least once; the run is made exactly-once by what it already
has: every effect is journaled and a re-delivered run resumes from its checkpoint. What
the queue cannot promise is that a worker frozen past its lease stays quiet when it
wakes: each delivery therefore takes the run's lease (`checkpoints.fencing`) and the
database refuses the old holder's writes.

The job table is the queue's bookkeeping; whether a run is done is the run registry's
word. Workers (`studies.worker`) take the jobs and sweep the queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy import Engine, select, text

from contreact.checkpoints.engines import engine_for
from contreact.checkpoints.fencing import (
    install_fences,
)
from contreact.checkpoints.run_record import RunRecord, record_from_row
from contreact.checkpoints.saver import open_saver
from contreact.checkpoints.schema import runs
from contreact.checkpoints.storage import Storage
from contreact.errors import StorageNotFoundError
from contreact.studies.batch import BatchSpec, short_of

TASK = "contreact.drive_run"
QUEUE_PREFIX = "contreact.study."
LEASE_S = float(os.environ.get("CONTREACT_LEASE_S", "10"))
"""A worker silent this long has lost its runs: another worker takes them over. Every
worker of a storage judges the others by its own value: set it alike everywhere."""
HEARTBEAT_S = LEASE_S / 5
"""How often a worker tells the queue it is alive."""
SWEEP_S = 2.0
"""How often a worker looks for stalled jobs, lost runs and the end of its studies."""
SETTLE_S = 0.2
"""How long after a job of its own ends a worker looks whether the study is done."""
WAIT_S = 1.0
"""How often a job waiting for a free host slot, or for a live driver to let go, looks."""
FINISHED = frozenset({"completed", "failed", "paused"})
"""Run statuses a worker leaves alone: a failed or paused run waits for a person."""

Notify = Callable[[str, str], None]


def queue_of(study: str) -> str:
    """The procrastinate queue a study's jobs go on."""
    return QUEUE_PREFIX + study


def prepare(storage: Storage) -> None:
    """Bring the database up to the queue (idempotent; two machines may call it at once).

    Procrastinate's schema, LangGraph's checkpoint tables, and the fence on them.
    """
    import psycopg

    # Machines starting at once on a new database would race to create the same tables
    # (LangGraph's migrations and SQLAlchemy's create_all fail or deadlock): one at a time.
    with psycopg.connect(storage.libpq_url, autocommit=True) as lock:
        # Tried, not waited for: a statement waiting on the lock would hold a snapshot, and
        # LangGraph's `CREATE INDEX CONCURRENTLY` under the lock waits for every snapshot.
        taken = "SELECT pg_try_advisory_lock(hashtext('contreact_prepare'))"
        while not lock.execute(taken).fetchone()[0]:  # type: ignore[index]
            time.sleep(0.1)
        engine = engine_for(storage)
        with open_saver(storage):
            pass  # LangGraph's tables, which the fence guards
        with engine.begin() as conn:
            present = conn.execute(text("SELECT to_regclass('procrastinate_jobs')")).scalar()
            if present is None:
                from procrastinate.schema import SchemaManager

                # Driver-level, without parameters: the schema's text has `%` signs of its own.
                conn.connection.driver_connection.execute(SchemaManager.get_schema())  # type: ignore[union-attr]
        install_fences(engine)


def prepare_to_work(storage: Storage) -> None:
    """Ready a worker's database: its study queue must be there, and nothing is created.

    A worker takes runs a `contreact batch` put on the queue. Pointed at a database that
    holds no queue (the wrong one, most likely), it has nothing to take and says so; it
    never makes contreact's tables or the queue's there.

    Raises:
        StorageNotFoundError: The database holds no contreact tables, or no study queue.
    """
    existing = storage.existing()
    with engine_for(existing).connect() as conn:
        present = conn.execute(text("SELECT to_regclass('procrastinate_jobs')")).scalar()
    if present is None:
        raise StorageNotFoundError(
            f"database {storage.shown_url} holds no study queue (nothing was created in it): "
            f"put a study on it with `contreact batch CONFIG --no-work --storage "
            f"{storage.shown_url}`, or check the URL"
        )
    prepare(existing)


@dataclass(frozen=True)
class Enqueued:
    """What enqueueing a study did."""

    queued: list[str]
    """Runs put on the queue now (new, or re-queued after their job was lost)."""
    waiting: list[str]
    """Runs already on the queue or being driven."""
    finished: list[str]
    """Runs already completed, or paused for the operator (`contreact reply` goes on)."""


def newest_jobs(
    engine: Engine, *, run_ids: Iterable[str] | None = None, queues: list[str] | None = None
) -> list[tuple[str, str, dict[str, Any]]]:
    """Each run's newest job: (run id, status, job args), of `run_ids` or of `queues`."""
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT DISTINCT ON (lock) lock, status::text, args FROM procrastinate_jobs "
                "WHERE task_name = :task "
                "AND (CAST(:ids AS text[]) IS NULL OR lock = ANY(CAST(:ids AS text[]))) "
                "AND (CAST(:queues AS text[]) IS NULL "
                "OR queue_name = ANY(CAST(:queues AS text[]))) "
                "ORDER BY lock, id DESC"
            ),
            {"task": TASK, "ids": None if run_ids is None else list(run_ids), "queues": queues},
        ).all()
    return [(str(lock), str(status), args) for lock, status, args in rows]


def run_records(engine: Engine, run_ids: Iterable[str]) -> dict[str, RunRecord]:
    """The registered runs among `run_ids`, in one read."""
    with engine.connect() as conn:
        rows = conn.execute(select(runs).where(runs.c.run_id.in_(list(run_ids)))).mappings()
        return {r.run_id: r for r in (record_from_row(dict(row)) for row in rows)}


def run_states(engine: Engine, run_ids: Iterable[str]) -> dict[str, tuple[str, bool]]:
    """Each registered run's status and whether a live process drives it, in one read."""
    records = run_records(engine, run_ids).values()
    return {r.run_id: (r.status, r.status == "running" and r.driven) for r in records}


def unqueue(storage: Storage, run_id: str) -> int:
    """Withdraw run `run_id`'s queued job (a deleted run must not be started again)."""
    from procrastinate import App, SyncPsycopgConnector

    with engine_for(storage).connect() as conn:
        if conn.execute(text("SELECT to_regclass('procrastinate_jobs')")).scalar() is None:
            return 0
    app = App(connector=SyncPsycopgConnector(conninfo=storage.libpq_url))
    with app.open():
        waiting = app.job_manager.list_jobs(lock=run_id, status="todo")
        return sum(
            app.job_manager.cancel_job_by_id(job.id, delete_job=True)
            for job in waiting
            if job.id is not None
        )


def _not_here(*_args: Any, **_kwargs: Any) -> None:
    raise RuntimeError("this process only puts runs on the queue; a worker takes them")


class StudyQueue:
    """The queue of one storage: put studies' runs on it (a `Worker` takes them)."""

    def __init__(
        self,
        storage: Storage,
        notify: Notify | None = None,
        job: Callable[..., Awaitable[None]] | None = None,
    ) -> None:
        """The queue in `storage`'s database.

        Args:
            storage: A PostgreSQL storage.
            notify: Told what happens to a run (run id, what).
            job: What takes a run's job (a worker's); None in a process that only enqueues.
        """
        from procrastinate import App, PsycopgConnector

        self.storage = storage
        self.engine = engine_for(storage)
        self.notify: Notify = notify or (lambda _run, _what: None)
        self.app = App(connector=PsycopgConnector(conninfo=storage.libpq_url))
        self.app.task(name=TASK, pass_context=True)(job or _not_here)

    # Enqueueing ---------------------------------------------------------------------------

    def enqueue(self, spec: BatchSpec) -> Enqueued:
        """Put every unfinished run of the study on the queue, once (see the module doc)."""
        return asyncio.run(self._enqueue_open(spec))

    async def _enqueue_open(self, spec: BatchSpec) -> Enqueued:
        async with self.app.open_async():
            return await self._enqueue(spec, [r.run_id for r in spec.runs])

    async def _enqueue(self, spec: BatchSpec, which: list[str]) -> Enqueued:
        from procrastinate.exceptions import AlreadyEnqueued

        newest = await asyncio.to_thread(newest_jobs, self.engine, run_ids=which)
        jobs = {run_id: status for run_id, status, _ in newest}
        records = await asyncio.to_thread(run_records, self.engine, which)
        queued, waiting, finished = [], [], []
        for planned in spec.runs:
            if planned.run_id not in which:
                continue
            record = records.get(planned.run_id)
            status = record.status if record is not None else None
            driven = record is not None and record.status == "running" and record.driven
            # A failed run is queued again (as `contreact batch` always resumed one); a
            # paused one waits for its operator's reply; a completed one whose batch now
            # asks for more cycles is queued to be extended (its job carries the cycles).
            if status == "paused" or (
                status == "completed"
                and record is not None
                and not short_of(record, planned.cycles)
            ):
                finished.append(planned.run_id)
                continue
            if driven or jobs.get(planned.run_id) in ("todo", "doing"):
                waiting.append(planned.run_id)
                continue
            task = self.app.tasks[TASK].configure(
                lock=planned.run_id, queueing_lock=planned.run_id, queue=queue_of(spec.name)
            )
            try:
                await task.defer_async(
                    study=spec.name,
                    planned=asdict(planned),
                    hosts=list(spec.hosts),
                    slots=(planned.config.get("ollama") or {}).get("parallel") or {},
                )
                queued.append(planned.run_id)
            except AlreadyEnqueued:
                waiting.append(planned.run_id)
        return Enqueued(queued, waiting, finished)


def requeue(storage: Storage, run_id: str) -> bool:
    """Put run `run_id` of a study back on its queue (its operator replied); whether it is one.

    A paused run's job has ended, and workers leave a paused run alone: once answered, it
    goes back on the queue with its job's own arguments, for any worker to take. False: the
    run is on no study's queue (started alone, or stored in SQLite).
    """
    if storage.is_sqlite:
        return False
    engine = engine_for(storage)
    with engine.connect() as conn:
        if conn.execute(text("SELECT to_regclass('procrastinate_jobs')")).scalar() is None:
            return False
    newest = newest_jobs(engine, run_ids=[run_id])
    if not newest:
        return False
    _, status, args = newest[0]
    if status in ("todo", "doing"):
        return True
    from procrastinate import App, SyncPsycopgConnector
    from procrastinate.exceptions import AlreadyEnqueued

    app = App(connector=SyncPsycopgConnector(conninfo=storage.libpq_url))
    with app.open():
        task = app.configure_task(
            TASK, lock=run_id, queueing_lock=run_id, queue=queue_of(str(args["study"]))
        )
        with contextlib.suppress(AlreadyEnqueued):
            task.defer(**args)
    return True
