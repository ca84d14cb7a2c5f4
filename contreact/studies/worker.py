"""A worker: takes queued runs of any study, drives each in its own process, sweeps.

Any number of workers (`contreact worker` on any machine, and `contreact batch` itself)
take runs from a storage's study queue (`studies.queue`). A job is one run: the worker
waits until no live process drives it, places it on the Ollama host with the most free
slots, takes the run's lease (`checkpoints.fencing`) and drives it in a process of its
own. Every worker sweeps: it retries the jobs of workers that stopped beating, re-queues a
run that is neither finished, nor driven, nor queued, and stops once every run of the
studies it serves is finished, unless it serves forever.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from typing import Any

from sqlalchemy import text

from contreact.checkpoints.fencing import (
    fenced_env,
    release_lease,
    take_lease,
    worker_name,
)
from contreact.checkpoints.registry import RunNotFoundError, get_run
from contreact.checkpoints.storage import Storage
from contreact.studies.batch import (
    BatchRunner,
    BatchSpec,
    PlannedRun,
    describe,
    host_answers,
    short_of,
)
from contreact.studies.fork_server import warm
from contreact.studies.queue import (
    FINISHED,
    HEARTBEAT_S,
    LEASE_S,
    SETTLE_S,
    SWEEP_S,
    TASK,
    WAIT_S,
    Notify,
    StudyQueue,
    newest_jobs,
    queue_of,
    run_records,
    run_states,
)


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


class Worker:
    """Works on the study queue of one storage (see the module doc)."""

    def __init__(self, storage: Storage, notify: Notify | None = None) -> None:
        self.queue = StudyQueue(storage, notify, job=self._job)
        self.storage = storage
        self.engine = self.queue.engine
        self.app = self.queue.app
        self.runners: set[BatchRunner] = set()
        """The jobs' runners, whose run processes a stopped worker stops."""

    @property
    def notify(self) -> Notify:
        """Told what happens to a run (run id, what)."""
        return self.queue.notify

    @notify.setter
    def notify(self, notify: Notify) -> None:
        self.queue.notify = notify

    # Working ------------------------------------------------------------------------------

    def work(
        self,
        *,
        parallel: int,
        studies: list[BatchSpec] | None = None,
        forever: bool = False,
    ) -> None:
        """Take queued runs (of `studies`, or of any study) until they are all finished.

        While other workers still hold runs, this one waits, so that it can take over any
        whose lease lapses. `forever`: keep waiting for new studies.
        """
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
        rows = newest_jobs(self.engine, queues=queues)
        states = run_states(self.engine, [run_id for run_id, _, _ in rows])
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
            record = (await asyncio.to_thread(run_records, self.engine, [run.run_id])).get(
                run.run_id
            )
            if record is not None and record.status == "completed":
                if not short_of(record, run.cycles):
                    self.notify(run.run_id, f"already completed ({run.cycles} cycles)")
                    return
            if record is None or not (record.status == "running" and record.driven):
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
        runner = BatchRunner(spec, self.storage, self.notify)
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
