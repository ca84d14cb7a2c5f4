"""What one active run and one idle queue worker cost their PostgreSQL, from its own counters.

Why: a study of 10,000 concurrent runs under 1,000 workers shares one PostgreSQL; what breaks
first (connections, commits, WAL, the queue's polling) follows from what *one* run and *one*
worker cost, multiplied out in docs/scale.md. These figures are that one run and that one
worker, measured by the server itself rather than estimated from the code.

How:

* **Runs.** K = 1, 4, 8 concurrent ``contreact run`` child processes (the way a queue job
  drives its run) on one scratch database ``bench_scale_<pid>``, against one stub in this
  process playing the constant-work cycle (three model calls, two tool calls; ``common.py``),
  at 0 ms and 200 ms per model call. Before and after each batch the script reads
  ``pg_stat_database`` for that database only (commits, rows inserted / updated / deleted),
  ``pg_database_size`` and the WAL written for it (``pg_walinspect`` over the batch's LSN
  range, keeping the records whose block references name the database, plus the commit
  records of their transactions; the server is shared, so the cluster-wide WAL position alone
  would count other databases' writes). A thread samples ``pg_stat_activity`` every 0.2 s for
  the connections the runs hold. Every batch is run twice, with C1 and C2 cycles per run: the
  difference divided by K x (C2 - C1) is the steady cost of one cycle (start-up, schema checks
  and teardown cancel out), the rest is the cost of starting and ending a run. Per second of
  an active run = per cycle / the seconds a cycle took (the stub's request stamps).
* **The run registry's heartbeat.** ``registry.beat`` (what ``Heartbeat`` does every second)
  100 times on one connection pool, counters before and after: the cost of one beat.
* **An idle procrastinate worker** (only if ``procrastinate`` is importable: it is not a
  dependency of contreact; ``pip install procrastinate==3.10.0``). On a second scratch
  database ``bench_scale_<pid>_queue``: an App with its schema, a worker with
  ``concurrency`` 10, a heartbeat every 2 s and the default polling (5 s), idle for 6 s and
  for 24 s (the difference is the idle cost per second, the rest its start and stop); then
  200 jobs deferred with ``lock`` and ``queueing_lock`` (the design's one job per run)
  and worked through. Printed: commits, rows and WAL per second idle, per job deferred and
  per job run, and the connections the worker holds (its pool and the LISTEN connection).

Monitoring reads go through a third database (``bench_scale_<pid>_mon``, which holds the
``pg_walinspect`` extension), so they never count in the measured database. Everything is
dropped at the end. Needs a PostgreSQL superuser (``pg_walinspect``, ``CREATE DATABASE``);
``--db-url`` names the server (default: the local test server).

Run: ``.venv/bin/python benchmarks/cost/pg_scale.py [--quick] [--db-url URL] [--no-queue]``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

# The shared helpers (common.py, ...) are in benchmarks/, the folder above this one.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psycopg
from common import (
    CONSTANT_CYCLE,
    BenchStorage,
    Figure,
    StampedStub,
    constant_work_agent,
    contreact_cmd,
    parser,
    print_table,
    report,
    run_at_once,
    run_config,
    write_yaml,
)

DEFAULT_SERVER = "postgresql://postgres@127.0.0.1:5432/test"
CALLS_PER_CYCLE = len(CONSTANT_CYCLE)
SAMPLE_EVERY_S = 0.2


# --------------------------------------------------------------------------- counters


@dataclass
class Counters:
    """One database's cumulative counters at one moment (or a difference of two)."""

    commits: float = 0.0
    rollbacks: float = 0.0
    inserted: float = 0.0
    updated: float = 0.0
    deleted: float = 0.0
    db_bytes: float = 0.0
    wal_bytes: float = 0.0
    """WAL written for this database (records naming it and their commits), FPIs included."""
    wal_fpi_bytes: float = 0.0
    """Of which full-page images (the first change to a page after each checkpoint)."""
    wal_records: float = 0.0

    @property
    def rows(self) -> float:
        """Rows written: inserted + updated + deleted."""
        return self.inserted + self.updated + self.deleted

    def __sub__(self, other: Counters) -> Counters:
        return Counters(*(getattr(self, f.name) - getattr(other, f.name) for f in fields(self)))

    def scaled(self, factor: float) -> Counters:
        """Every counter times ``factor``."""
        return Counters(*(getattr(self, f.name) * factor for f in fields(self)))


class Monitor:
    """Reads a measured database's counters from outside it (the ``_mon`` database)."""

    def __init__(self, mon_url: str, dbname: str, *, keep_wal: bool = True) -> None:
        self.url, self.dbname = mon_url, dbname
        self.conn = psycopg.connect(mon_url, autocommit=True)
        row = self.conn.execute("SELECT oid FROM pg_database WHERE datname = %s", [dbname])
        self.oid = int(row.fetchone()[0])  # type: ignore[index]
        # A checkpoint during a batch would recycle the WAL segments it is read from; a
        # temporary slot keeps them until this connection closes (and never outlives it).
        if keep_wal:
            self.conn.execute(
                "SELECT pg_create_physical_replication_slot(%s, true, true)",
                [f"bench_scale_{os.getpid()}_{uuid.uuid4().hex[:6]}"],
            )

    def close(self) -> None:
        """Close the monitoring connection."""
        self.conn.close()

    def connections(self) -> int:
        """Client connections open to the measured database now."""
        row = self.conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s "
            "AND backend_type = 'client backend'",
            [self.dbname],
        ).fetchone()
        return int(row[0])  # type: ignore[index]

    def wait_idle(self, timeout_s: float = 30.0) -> None:
        """Wait until nothing is connected to the measured database.

        A backend flushes its statistics when it exits; reading before every client is
        gone would miss the last transactions of the batch.
        """
        deadline = time.monotonic() + timeout_s
        while self.connections() and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.5)

    def lsn(self) -> str:
        """The WAL position flushed so far (``pg_walinspect`` reads no further)."""
        return str(self.conn.execute("SELECT pg_current_wal_flush_lsn()").fetchone()[0])  # type: ignore[index]

    def read(self) -> Counters:
        """The measured database's cumulative counters (WAL fields left at 0)."""
        self.conn.execute("SELECT pg_stat_clear_snapshot()")
        row = self.conn.execute(
            "SELECT xact_commit, xact_rollback, tup_inserted, tup_updated, tup_deleted, "
            "pg_database_size(datname) FROM pg_stat_database WHERE datname = %s",
            [self.dbname],
        ).fetchone()
        assert row is not None
        return Counters(*(float(v) for v in row))

    def wal_between(self, start: str, end: str) -> tuple[float, float, float]:
        """Bytes, FPI bytes and records of WAL written for the measured database.

        A record belongs to it if one of its block references names the database's OID
        (``rel TABLESPACE/DATABASE/RELFILENODE``); a commit record names no block, so the
        commits of transactions that wrote such a record count too.
        """
        row = self.conn.execute(
            """
            WITH r AS (SELECT * FROM pg_get_wal_records_info(%(a)s, %(b)s)),
                 ours AS (SELECT * FROM r WHERE block_ref ~ %(pat)s),
                 xids AS (SELECT DISTINCT xid FROM ours WHERE xid <> 0)
            SELECT coalesce(sum(record_length), 0), coalesce(sum(fpi_length), 0), count(*)
            FROM r WHERE block_ref ~ %(pat)s
               OR (xid IN (SELECT xid FROM xids) AND resource_manager = 'Transaction')
            """,
            {"a": start, "b": end, "pat": f"rel [0-9]+/{self.oid}/"},
        ).fetchone()
        assert row is not None
        return float(row[0]), float(row[1]), float(row[2])


@contextmanager
def measured(monitor: Monitor) -> Iterator[list[Counters]]:
    """Counters of the measured database over the ``with`` block (appended on exit).

    Waits for the database to be idle at both ends so that every backend's statistics are
    flushed.
    """
    monitor.wait_idle()
    before, start = monitor.read(), monitor.lsn()
    out: list[Counters] = []
    yield out
    monitor.wait_idle()
    after, end = monitor.read(), monitor.lsn()
    delta = after - before
    delta.wal_bytes, delta.wal_fpi_bytes, delta.wal_records = monitor.wal_between(start, end)
    out.append(delta)


class ConnectionSampler:
    """Samples the connections open to the measured database every 0.2 s, in a thread."""

    def __init__(self, monitor: Monitor) -> None:
        self.monitor = Monitor(monitor.url, monitor.dbname, keep_wal=False)
        self.samples: list[tuple[float, int]] = []
        """(``time.monotonic()``, connections open)."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_EVERY_S):
            self.samples.append((time.monotonic(), self.monitor.connections()))

    def __enter__(self) -> ConnectionSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.monitor.close()

    @property
    def peak(self) -> int:
        """The most connections seen at once."""
        return max((n for _, n in self.samples), default=0)

    def median_between(self, start: float, end: float) -> float:
        """The median of the samples taken in [start, end] (all of them if none)."""
        inside = [n for t, n in self.samples if start <= t <= end]
        return float(statistics.median(inside or [n for _, n in self.samples] or [0]))


# --------------------------------------------------------------------------- databases


@contextmanager
def scratch_databases(server: str, *suffixes: str) -> Iterator[dict[str, str]]:
    """``bench_scale_<pid><suffix>`` for each suffix, created now and dropped on exit.

    Yields:
        Suffix -> libpq URL of that database.
    """
    admin = server.replace("postgresql+psycopg://", "postgresql://", 1)
    base = admin.rsplit("/", 1)[0]
    names = {s: f"bench_scale_{os.getpid()}{s}" for s in suffixes}
    with psycopg.connect(admin, autocommit=True) as conn:
        for name in names.values():
            conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield {s: f"{base}/{name}" for s, name in names.items()}
    finally:
        from contreact.checkpoints.engines import dispose_engines

        dispose_engines()
        with psycopg.connect(admin, autocommit=True) as conn:
            for name in names.values():
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# -------------------------------------------------------------------------------- runs


@dataclass
class Batch:
    """K concurrent runs of ``cycles`` cycles each, and what the database saw."""

    runs: int
    cycles: int
    latency_ms: float
    delta: Counters
    wall_s: float
    seconds_per_call: float
    """Median over the runs of (last request - first request) / (requests - 1)."""
    peak_connections: int
    steady_connections: float


def run_batch(
    stub: StampedStub,
    latency_ms: float,
    monitor: Monitor,
    where: BenchStorage,
    runs: int,
    cycles: int,
    tag: str,
) -> Batch:
    """Start ``runs`` `contreact run` processes at once and read what they cost the database."""
    models = [f"scale-{i}" for i in range(1, runs + 1)]
    commands = []
    for model in models:
        config = run_config(f"sc-{tag}-{model}", stub.url, cycles, where, model=model)
        path = write_yaml(where.data_dir.parent / f"{tag}-{model}.yaml", config)
        commands.append(contreact_cmd(where, "run", str(path), "--quiet"))
    with measured(monitor) as delta, ConnectionSampler(monitor) as sampler:
        t0 = time.monotonic()
        run_at_once(commands)
        wall = time.monotonic() - t0
    per_call, firsts, lasts = [], [], []
    for model in models:
        times = [s.at for s in stub.agent.since(t0) if s.model.split(":")[0] == model]
        if len(times) > 1:
            per_call.append((max(times) - min(times)) / (len(times) - 1))
            firsts.append(min(times))
            lasts.append(max(times))
    # Connections while every run is in its cycles (after start-up, before teardown).
    steady_conns = sampler.median_between(max(firsts, default=0), min(lasts, default=0))
    return Batch(
        runs,
        cycles,
        latency_ms,
        delta[0],
        wall,
        statistics.median(per_call) if per_call else 0.0,
        sampler.peak,
        steady_conns,
    )


@dataclass
class Steady:
    """The steady cost of one cycle of one run, and of starting and ending one run."""

    runs: int
    latency_ms: float
    per_cycle: Counters
    per_run_start_end: Counters
    seconds_per_cycle: float
    connections_per_run: float
    peak_connections_per_run: float

    @property
    def per_second(self) -> Counters:
        """What one active run costs per second (steady, start-up left out)."""
        return self.per_cycle.scaled(1 / self.seconds_per_cycle)


def steady(short: Batch, long: Batch) -> Steady:
    """The difference of two batches that differ only in cycles per run."""
    k = long.runs
    per_cycle = (long.delta - short.delta).scaled(1 / (k * (long.cycles - short.cycles)))
    start_end = (short.delta - per_cycle.scaled(k * short.cycles)).scaled(1 / k)
    return Steady(
        k,
        long.latency_ms,
        per_cycle,
        start_end,
        long.seconds_per_call * CALLS_PER_CYCLE,
        long.steady_connections / k,
        long.peak_connections / k,
    )


def measure_runs(
    server_db: str,
    monitor: Monitor,
    where: BenchStorage,
    counts: list[int],
    cycles: tuple[int, int],
) -> tuple[list[Steady], dict[str, float], list[list[Any]]]:
    """Every (latency, K) pair twice (C1 and C2 cycles); the heartbeat's cost at the end.

    A slow model (1,500 ms) is measured with one run only: it checks the rule that
    extrapolates 200 ms to 2-10 s per call, past the 1 s after which a held connection is
    pinged before its next transaction (``checkpoints.transactions.PING_AFTER_IDLE_S``).
    """
    slow_cycles = (1, 2) if cycles[0] < 4 else (2, 5)
    plan = [(0.0, counts, cycles), (200.0, counts, cycles), (1500.0, [1], slow_cycles)]
    results: list[Steady] = []
    for latency, ks, (c1, c2) in plan:
        models = [f"scale-{i}" for i in range(1, max(ks) + 1)]
        with StampedStub(constant_work_agent(c2), latency_ms=latency, models=models) as stub:
            if not results:
                # The first run in a database creates the schema: not a run's steady cost.
                run_batch(stub, latency, monitor, where, 1, 1, "warm")
            for k in ks:
                tag = uuid.uuid4().hex[:6]
                short = run_batch(stub, latency, monitor, where, k, c1, f"{tag}a")
                long = run_batch(stub, latency, monitor, where, k, c2, f"{tag}b")
                results.append(steady(short, long))
                print(
                    f"  {latency:.0f} ms, {k} runs: {long.wall_s:.1f} s for {c2} cycles",
                    flush=True,
                )
    return results, heartbeat_cost(server_db, monitor, where), table_shares(server_db)


def table_shares(server_db: str) -> list[list[Any]]:
    """Rows written to each table over every batch, and its size: what partitioning would split.

    Read last, from inside the measured database (per-table statistics are visible only
    there), once every batch is over.
    """
    with psycopg.connect(server_db, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        rows = conn.execute(
            "SELECT relname, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del, "
            "pg_total_relation_size(relid) FROM pg_stat_user_tables "
            "WHERE n_tup_ins + n_tup_upd + n_tup_del > 0"
        ).fetchall()
    total = sum(r[1] + r[2] + r[4] for r in rows) or 1
    out = [
        [r[0], r[1], r[2], r[3], r[4], f"{100 * (r[1] + r[2] + r[4]) / total:.1f} %", r[5] // 1024]
        for r in rows
    ]
    return sorted(out, key=lambda r: -(r[1] + r[2] + r[4]))


def heartbeat_cost(
    server_db: str, monitor: Monitor, where: BenchStorage, beats: int = 100
) -> dict[str, float]:
    """What one ``registry.beat`` costs the database (a run beats once a second)."""
    from contreact.checkpoints.engines import dispose_engines, engine_for
    from contreact.checkpoints.registry import beat

    with psycopg.connect(server_db) as conn:
        run_id = str(conn.execute("SELECT run_id FROM contreact_runs LIMIT 1").fetchone()[0])  # type: ignore[index]
    with measured(monitor) as delta:
        engine = engine_for(where.storage())
        t0 = time.perf_counter()
        for _ in range(beats):
            beat(engine, run_id)
        elapsed = time.perf_counter() - t0
        dispose_engines()
    d = delta[0].scaled(1 / beats)
    return {
        "commits": d.commits,
        "rows": d.rows,
        "wal_bytes": d.wal_bytes,
        "wal_fpi_bytes": d.wal_fpi_bytes,
        "ms": elapsed / beats * 1000,
    }


# ------------------------------------------------------------------------------- queue


@dataclass
class QueueCost:
    """What a procrastinate worker costs its database."""

    idle_per_s: Counters
    start_stop: Counters
    """Starting and stopping a worker (register, prune, unregister, opening the pool)."""
    idle_connections: float
    per_defer: Counters
    per_job: Counters
    job_connections: int
    jobs: int
    idle_s: float
    concurrency: int
    notes: list[str] = field(default_factory=list)


def measure_queue(queue_url: str, monitor: Monitor, idle_s: float, jobs: int) -> QueueCost:
    """An idle procrastinate worker for ``idle_s``, then ``jobs`` no-op jobs through it."""
    import procrastinate

    # A throwaway App defined in the script's own module, on purpose: not worth a warning.
    logging.getLogger("procrastinate").setLevel(logging.ERROR)
    concurrency = 10
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=queue_url))

    @app.task(name="drive_run")
    async def drive_run(run_id: str) -> None:
        """Stands for a job that drives one run (here: returns at once)."""

    worker_options: dict[str, Any] = {
        "concurrency": concurrency,
        "update_heartbeat_interval": 2.0,
        "install_signal_handlers": False,
        "delete_jobs": "never",
    }

    async def schema() -> None:
        async with app.open_async():
            await app.schema_manager.apply_schema_async()

    async def idle_worker(seconds: float) -> None:
        async with app.open_async():
            task = asyncio.create_task(app.run_worker_async(wait=True, **worker_options))
            await asyncio.sleep(seconds)
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass

    async def defer() -> None:
        async with app.open_async():
            for i in range(jobs):
                rid = f"run-{i}"
                await drive_run.configure(lock=rid, queueing_lock=rid).defer_async(run_id=rid)

    async def work() -> None:
        async with app.open_async():
            await app.run_worker_async(wait=False, **worker_options)

    asyncio.run(schema())
    idle: dict[float, Counters] = {}
    for seconds in (idle_s / 4, idle_s):
        with measured(monitor) as delta, ConnectionSampler(monitor) as idle_sampler:
            t0 = time.monotonic()
            asyncio.run(idle_worker(seconds))
        idle[seconds] = delta[0]
    idle_per_s = (idle[idle_s] - idle[idle_s / 4]).scaled(1 / (idle_s * 3 / 4))
    start_stop = idle[idle_s] - idle_per_s.scaled(idle_s)
    idle_conns = idle_sampler.median_between(t0 + 2, t0 + idle_s - 1)
    with measured(monitor) as deferred:
        asyncio.run(defer())
    with measured(monitor) as worked, ConnectionSampler(monitor) as job_sampler:
        t0 = time.monotonic()
        asyncio.run(work())
        work_s = time.monotonic() - t0
    # The worker's own start, stop and idle load while it worked are not the jobs' cost.
    per_job = (worked[0] - start_stop - idle_per_s.scaled(work_s)).scaled(1 / jobs)
    return QueueCost(
        idle_per_s,
        start_stop,
        idle_conns,
        deferred[0].scaled(1 / jobs),
        per_job,
        job_sampler.peak,
        jobs,
        idle_s,
        concurrency,
        [f"{jobs} jobs worked through in {work_s:.1f} s"],
    )


# ----------------------------------------------------------------------------- figures


def counter_cells(c: Counters) -> list[Any]:
    """Commits, rows (ins/upd/del), WAL kB (of which FPI), for a table row."""
    return [
        round(c.commits, 2),
        round(c.rows, 2),
        f"{c.inserted:.1f}/{c.updated:.1f}/{c.deleted:.1f}",
        round(c.wal_bytes / 1000, 2),
        round(c.wal_fpi_bytes / 1000, 2),
        round(c.db_bytes / 1000, 2),
    ]


COUNTER_HEADERS = ["commits", "rows", "ins/upd/del", "WAL kB", "of it FPI kB", "DB growth kB"]


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--no-queue", action="store_true", help="skip the procrastinate worker")
    args = p.parse_args()
    server = args.db_url or DEFAULT_SERVER
    counts = [1, 4] if args.quick else [1, 4, 8]
    cycles = (2, 5) if args.quick else (4, 16)
    idle_s, jobs = (8.0, 40) if args.quick else (24.0, 200)
    with scratch_databases(server, "", "_queue", "_mon") as urls:
        with psycopg.connect(urls["_mon"], autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
        monitor = Monitor(urls["_mon"], urls[""].rsplit("/", 1)[1])
        settings = monitor.conn.execute(
            "SELECT name, setting FROM pg_settings WHERE name IN ('max_connections', "
            "'synchronous_commit', 'full_page_writes', 'wal_compression', 'checkpoint_timeout', "
            "'shared_buffers') ORDER BY name"
        ).fetchall()
        version = monitor.conn.execute("SHOW server_version").fetchone()
        print(
            f"PostgreSQL {version[0] if version else '?'}: "
            + ", ".join(f"{name}={value}" for name, value in settings),
            flush=True,
        )
        with tempfile.TemporaryDirectory(prefix="contreact-pg-scale-") as tmp:
            where = BenchStorage(
                Path(tmp) / "runs", urls[""].replace("postgresql://", "postgresql+psycopg://", 1)
            )
            print(f"runs: K = {counts}, {cycles[0]} and {cycles[1]} cycles each", flush=True)
            results, beat, tables = measure_runs(urls[""], monitor, where, counts, cycles)
        monitor.close()
        queue: QueueCost | None = None
        queue_note = ""
        if not args.no_queue:
            try:
                import procrastinate  # noqa: F401
            except ImportError:
                queue_note = "procrastinate not installed: pip install procrastinate==3.10.0"
            else:
                print(f"queue: idle worker {idle_s:.0f} s, then {jobs} jobs", flush=True)
                qmon = Monitor(urls["_mon"], urls["_queue"].rsplit("/", 1)[1])
                queue = measure_queue(urls["_queue"], qmon, idle_s, jobs)
                qmon.close()
    print_table(
        ["table", "inserted", "updated", "of them HOT", "deleted", "share of rows", "KiB"],
        tables,
        title="rows written per table over every batch above (the run's database)",
    )
    print_figures(results, beat, queue, queue_note, cycles, args.json)


def print_figures(
    results: list[Steady],
    beat: dict[str, float],
    queue: QueueCost | None,
    queue_note: str,
    cycles: tuple[int, int],
    json_path: str | None,
) -> None:
    """The tables and the figures docs/scale.md multiplies out."""
    title = (
        f"per cycle of one run (steady: batches of {cycles[1]} minus {cycles[0]} cycles per "
        f"run, at 1,500 ms fewer; constant-work cycle, {CALLS_PER_CYCLE} model calls)"
    )
    print_table(
        ["latency ms", "runs", "s per cycle", *COUNTER_HEADERS],
        [
            [r.latency_ms, r.runs, round(r.seconds_per_cycle, 3), *counter_cells(r.per_cycle)]
            for r in results
        ],
        title=title,
    )
    print_table(
        ["latency ms", "runs", *COUNTER_HEADERS, "connections/run (steady, peak)"],
        [
            [
                r.latency_ms,
                r.runs,
                *counter_cells(r.per_second),
                f"{r.connections_per_run:.1f}, {r.peak_connections_per_run:.1f}",
            ]
            for r in results
        ],
        title="per second of one active run",
    )
    print_table(
        ["latency ms", "runs", *COUNTER_HEADERS],
        [[r.latency_ms, r.runs, *counter_cells(r.per_run_start_end)] for r in results],
        title="starting and ending one run (a whole `contreact run` minus its cycles)",
    )
    print_table(
        ["commits", "rows", "WAL bytes", "of it FPI bytes", "ms"],
        [
            [
                round(beat["commits"], 2),
                round(beat["rows"], 2),
                round(beat["wal_bytes"]),
                round(beat["wal_fpi_bytes"]),
                round(beat["ms"], 2),
            ]
        ],
        title="one registry heartbeat (registry.beat; a driving process beats once a second)",
    )
    figures = []
    base = next(r for r in results if r.runs == 1 and r.latency_ms == 0)
    one_slow = next(r for r in results if r.runs == 1 and r.latency_ms == 200)
    overhead_s = one_slow.seconds_per_cycle / CALLS_PER_CYCLE - one_slow.latency_ms / 1000
    figures += [
        Figure("cyc-commits", "commits per cycle, 1 run", base.per_cycle.commits, "commits"),
        Figure("cyc-rows", "rows written per cycle, 1 run", base.per_cycle.rows, "rows"),
        Figure("cyc-wal", "WAL per cycle, 1 run", base.per_cycle.wal_bytes / 1000, "kB"),
        Figure("cyc-db", "database growth per cycle, 1 run", base.per_cycle.db_bytes / 1000, "kB"),
        Figure("conn", "connections held per active run", base.connections_per_run, "conns"),
        Figure("s-0", "commits/s per active run, 0 ms model", base.per_second.commits, "/s"),
        Figure(
            "s-200", "commits/s per active run, 200 ms model", one_slow.per_second.commits, "/s"
        ),
        Figure("ovh", "engine time per model call beside a 200 ms model", overhead_s * 1000, "ms"),
        Figure("beat", "WAL per registry heartbeat", beat["wal_bytes"], "bytes"),
    ]
    if queue is not None:
        print_table(
            ["what", *COUNTER_HEADERS],
            [
                [
                    f"idle worker, per second (concurrency {queue.concurrency})",
                    *counter_cells(queue.idle_per_s),
                ],
                ["starting and stopping the worker", *counter_cells(queue.start_stop)],
                ["per job deferred (lock + queueing_lock)", *counter_cells(queue.per_defer)],
                ["per job fetched and finished", *counter_cells(queue.per_job)],
            ],
            title="procrastinate 3.10 worker (heartbeat every 2 s, polling every 5 s, LISTEN)",
        )
        print(
            f"connections held by the idle worker: {queue.idle_connections:.0f}; "
            f"while working jobs: {queue.job_connections} (peak). " + "; ".join(queue.notes)
        )
        figures += [
            Figure("q-idle", "idle worker commits/s", queue.idle_per_s.commits, "/s"),
            Figure("q-conn", "idle worker connections", queue.idle_connections, "conns"),
            Figure(
                "q-job",
                "commits per job (defer + fetch + finish)",
                queue.per_defer.commits + queue.per_job.commits,
                "commits",
            ),
        ]
    elif queue_note:
        print(queue_note)
    report(figures, json_path)


if __name__ == "__main__":
    main()
