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
word. Every worker sweeps (`SWEEP_S`): it retries stalled jobs and re-queues a run that is
neither finished, nor driven, nor queued (its job was lost, or settled by a worker that
had lost it). A worker stops once every run of the studies it serves is finished, unless
it serves forever.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy import Engine, select, text

from contreact.batch import (
    BatchRunner,
    BatchSpec,
    PlannedRun,
    describe,
    host_answers,
)
from contreact.checkpoints.engines import engine_for
from contreact.checkpoints.fencing import (
    fenced_env,
    install_fences,
    release_lease,
    take_lease,
    worker_name,
)
from contreact.checkpoints.registry import RunNotFoundError, get_run
from contreact.checkpoints.run_record import record_from_row
from contreact.checkpoints.saver import open_saver
from contreact.checkpoints.schema import runs
from contreact.checkpoints.storage import Storage
from contreact.run_process import warm

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


@dataclass(frozen=True)
class Enqueued:
    """What enqueueing a study did."""

    queued: list[str]
    """Runs put on the queue now (new, or re-queued after their job was lost)."""
    waiting: list[str]
    """Runs already on the queue or being driven."""
    finished: list[str]
    """Runs already completed, or paused for the operator (`contreact reply` goes on)."""


def _newest_jobs(
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


def _run_states(engine: Engine, run_ids: Iterable[str]) -> dict[str, tuple[str, bool]]:
    """Each registered run's status and whether a live process drives it, in one read."""
    with engine.connect() as conn:
        rows = conn.execute(select(runs).where(runs.c.run_id.in_(list(run_ids)))).mappings()
        records = [record_from_row(dict(r)) for r in rows]
    return {r.run_id: (r.status, r.status == "running" and r.driven) for r in records}


def _run_state(engine: Engine, run_id: str) -> tuple[str | None, bool]:
    """The run's registry status (None: not started) and whether a live process drives it."""
    return _run_states(engine, [run_id]).get(run_id, (None, False))


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
    newest = _newest_jobs(engine, run_ids=[run_id])
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


def _settled_elsewhere(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """Asyncio's report of a task's unretrieved exception, except the one a takeover causes.

    A worker whose lease passed on settles its job late, after the worker that took the
    run over settled it: procrastinate refuses ("Job was not found or not in ... status")
    and, from a task nobody awaits, asyncio would print the traceback. The run's truth is
    in the registry and the lease; that refusal is expected and says nothing new.
    """
    exc = context.get("exception")
    cause = exc.__cause__ if exc is not None else None
    if cause is not None and "Job was not found or not in" in str(cause):
        return
    loop.default_exception_handler(context)


class StudyQueue:
    """The queue of one storage: enqueue studies, and work on them."""

    def __init__(self, storage: Storage, notify: Notify | None = None) -> None:
        from procrastinate import App, PsycopgConnector

        self.storage = storage
        self.engine = engine_for(storage)
        self.notify: Notify = notify or (lambda _run, _what: None)
        self.app = App(connector=PsycopgConnector(conninfo=storage.libpq_url))
        self.runners: set[BatchRunner] = set()
        """The jobs' runners, whose run processes a stopped worker stops."""
        self.app.task(name=TASK, pass_context=True)(self._job)

    # Enqueueing ---------------------------------------------------------------------------

    def enqueue(self, spec: BatchSpec) -> Enqueued:
        """Put every unfinished run of the study on the queue, once (see the module doc)."""
        return asyncio.run(self._enqueue_open(spec))

    async def _enqueue_open(self, spec: BatchSpec) -> Enqueued:
        async with self.app.open_async():
            return await self._enqueue(spec, [r.run_id for r in spec.runs])

    async def _enqueue(self, spec: BatchSpec, which: list[str]) -> Enqueued:
        from procrastinate.exceptions import AlreadyEnqueued

        newest = await asyncio.to_thread(_newest_jobs, self.engine, run_ids=which)
        jobs = {run_id: status for run_id, status, _ in newest}
        states = await asyncio.to_thread(_run_states, self.engine, which)
        queued, waiting, finished = [], [], []
        for planned in spec.runs:
            if planned.run_id not in which:
                continue
            status, driven = states.get(planned.run_id, (None, False))
            # A failed run is queued again (as `contreact batch` always resumed one); a
            # paused one waits for its operator's reply.
            if status in ("completed", "paused"):
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

    # Working ------------------------------------------------------------------------------

    def work(
        self,
        *,
        parallel: int,
        studies: list[BatchSpec] | None = None,
        forever: bool = False,
        cli_flags: list[str] | None = None,
    ) -> None:
        """Take queued runs (of `studies`, or of any study) until they are all finished.

        While other workers still hold runs, this one waits, so that it can take over any
        whose lease lapses. `forever`: keep waiting for new studies.
        """
        self.cli_flags = cli_flags or []
        self.specs = {s.name: s for s in studies or []}
        asyncio.run(self._work(parallel, studies, forever))

    async def _work(self, parallel: int, studies: list[BatchSpec] | None, forever: bool) -> None:
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(_settled_elsewhere)
        # Each job waits on its child in a thread: enough threads for every slot.
        from concurrent.futures import ThreadPoolExecutor

        loop.set_default_executor(ThreadPoolExecutor(max_workers=parallel + 4))
        queues = [queue_of(s.name) for s in studies] if studies else None
        warm()  # the run processes' fork server imports the engine while the worker starts
        self._changed = asyncio.Event()
        async with self.app.open_async():
            worker = asyncio.create_task(
                self.app.run_worker_async(
                    queues=queues,  # type: ignore[arg-type]  # None: every queue
                    concurrency=parallel,
                    name=worker_name(),
                    wait=True,
                    install_signal_handlers=False,
                    update_heartbeat_interval=HEARTBEAT_S,
                    stalled_worker_timeout=LEASE_S,
                    fetch_job_polling_interval=WAIT_S,
                    delete_jobs="never",
                )
            )
            stop = asyncio.Event()

            def stopping() -> None:
                stop.set()
                self._changed.set()

            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, stopping)
            stopped = True  # until the loop below ends by itself
            try:
                while not worker.done():
                    # A job that ends may have ended the study: look at once, not a sweep later.
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._changed.wait(), SWEEP_S)
                        if not stop.is_set():
                            await asyncio.sleep(SETTLE_S)  # procrastinate settles the job
                    self._changed.clear()
                    if stop.is_set():
                        break
                    if await self._sweep(queues) and not forever:
                        stopped = False
                        break
            finally:
                if stopped:
                    # Stopped (Ctrl-C, SIGTERM) with runs in hand: their processes record
                    # them interrupted and exit, their jobs end, and another worker's sweep
                    # queues them again. (When the study is done, a run process still in
                    # hand is one whose lease passed on: it is left to meet the fence.)
                    for runner in list(self.runners):
                        runner.stop_children()
                # procrastinate's own stop: it waits for the jobs in hand to end.
                worker.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await worker
                for sig in (signal.SIGINT, signal.SIGTERM):
                    loop.remove_signal_handler(sig)
        if stop.is_set():
            raise KeyboardInterrupt

    async def _sweep(self, queues: list[str] | None) -> bool:
        """Retry stalled jobs, re-queue lost runs; whether every run served is finished."""
        manager = self.app.job_manager
        await manager.prune_stalled_workers(LEASE_S)
        for job in await manager.get_stalled_jobs(seconds_since_heartbeat=LEASE_S):
            if queues is not None and job.queue not in queues:
                continue
            with contextlib.suppress(Exception):  # another worker retried it first
                await manager.retry_job(job)
                planned: Any = job.task_kwargs.get("planned") or {}
                run_id = str(planned.get("run_id"))
                self.notify(run_id, "its worker stopped beating; queued again")
        open_runs, lost = await asyncio.to_thread(self._open_runs, queues)
        for args in lost:
            await self._requeue(args)
        return not open_runs

    def _open_runs(self, queues: list[str] | None) -> tuple[list[str], list[dict[str, Any]]]:
        """Runs of the served studies that are not finished, and the lost ones' job args."""
        rows = _newest_jobs(self.engine, queues=queues)
        states = _run_states(self.engine, [run_id for run_id, _, _ in rows])
        open_runs, lost = [], []
        for run_id, job_status, args in rows:
            queued = job_status in ("todo", "doing")
            status, driven = states.get(run_id, (None, False))
            if status in FINISHED and not queued:
                continue
            open_runs.append(run_id)
            if not queued and not driven:
                lost.append(args)
        return open_runs, lost

    async def _requeue(self, args: dict[str, Any]) -> None:
        from procrastinate.exceptions import AlreadyEnqueued

        run_id = args["planned"]["run_id"]
        task = self.app.tasks[TASK].configure(
            lock=run_id, queueing_lock=run_id, queue=queue_of(args["study"])
        )
        with contextlib.suppress(AlreadyEnqueued):
            await task.defer_async(**args)
            self.notify(run_id, "nobody drives it and its job is gone; queued again")

    # The job ------------------------------------------------------------------------------

    async def _job(
        self,
        context: Any,
        study: str,
        planned: dict[str, Any],
        hosts: list[str],
        slots: dict[str, int],
    ) -> None:
        run = PlannedRun(**planned)
        while True:  # a live driver (a person's `resume`, a lapsed worker's) finishes first
            status, driven = await asyncio.to_thread(_run_state, self.engine, run.run_id)
            if status == "completed":
                self.notify(run.run_id, f"already {status}")
                return
            if not driven:
                break
            await asyncio.sleep(WAIT_S)
        try:
            await self._drive(study, run, hosts, slots, context.job.id)
        finally:
            self._changed.set()

    async def _drive(
        self, study: str, run: PlannedRun, hosts: list[str], slots: dict[str, int], job_id: int
    ) -> None:
        host, token = await self._place(run, hosts, slots, job_id)
        spec = BatchSpec(study, [run], hosts, 1)
        runner = BatchRunner(spec, self.storage, self.cli_flags, self.notify)
        self.runners.add(runner)
        try:
            result = await asyncio.to_thread(runner.drive, run, host, fenced_env(token), False)
        finally:
            self.runners.discard(runner)
            still = await asyncio.to_thread(release_lease, self.engine, run.run_id, token)
        if not still:
            self.notify(
                run.run_id,
                "this worker lost its lease to another worker; its process wrote nothing more",
            )
            return
        self.notify(run.run_id, describe(result))

    async def _place(
        self, run: PlannedRun, hosts: list[str], slots: dict[str, int], job_id: int
    ) -> tuple[str | None, int]:
        """The host with the most free slots that answers, and the run's lease on it."""
        while True:
            host, token = await asyncio.to_thread(self._take, run, hosts, slots, job_id)
            if token is not None:
                return host, token
            await asyncio.sleep(WAIT_S)

    def _take(
        self, run: PlannedRun, hosts: list[str], slots: dict[str, int], job_id: int
    ) -> tuple[str | None, int | None]:
        if not hosts:
            return None, take_lease(self.engine, run.run_id, host="", job_id=job_id)
        with self.engine.begin() as conn:
            # One placement at a time, across machines: two jobs must not both take the
            # last slot of a host.
            conn.execute(text("SELECT pg_advisory_xact_lock(hashtext('contreact_hosts'))"))
            busy: dict[str, int] = dict(
                conn.execute(
                    text(
                        "SELECT l.host, count(*) FROM contreact_leases l JOIN procrastinate_jobs "
                        "j ON j.id = l.job_id WHERE NOT l.released AND j.status = 'doing' "
                        "AND l.run_id <> :run GROUP BY l.host"
                    ),
                    {"run": run.run_id},
                ).all()
            )
            try:
                previous: str | None = get_run(self.engine, run.run_id).host
            except RunNotFoundError:
                previous = (run.config.get("ollama") or {}).get("host")

            def free(host: str) -> float:
                return float(slots.get(host, float("inf"))) - busy.get(host, 0)

            # Most free slots first; among equals the run's own host (its prompt cache is
            # there), then the least busy.
            ranked = sorted(hosts, key=lambda h: (-free(h), h != previous, busy.get(h, 0)))
            open_hosts = [h for h in ranked if free(h) > 0]
            if not open_hosts:
                return None, None  # every host's slots are taken: wait for one
            # The first that answers; if none does, the first anyway: the run then fails
            # saying which host is down, rather than waiting without a word.
            host = next((h for h in open_hosts if host_answers(h)), open_hosts[0])
            return host, take_lease(self.engine, run.run_id, host=host, job_id=job_id)
