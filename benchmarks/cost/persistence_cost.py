"""What exactly-once persistence costs, per model call, per stored cycle and at resume.

One script, one run, both backends (SQLite file, then a throwaway PostgreSQL database),
so that every persistence-cost figure is measured under the same machine load:

1. **CPU and wall ms per model call** of this process, for three levels of machinery
   that make the same model calls to the same stub (child process, 0 ms latency) with
   the constant-work script (``common.CONSTANT_CYCLE``: write, read, answer):

   (a) a hand-written ``ChatOllama`` loop (no saver, no journal, no events);
   (b) plain LangGraph, the same five nodes, the same saver (``checkpoints.saver``),
       ``durability="sync"`` (a checkpoint after every step, as the ``step`` policy);
   (b2) the same, saving once per cycle as the ``cycle`` policy does (an interrupt after
       ``reflect``, one ``invoke`` per cycle, ``durability="exit"``); also without a
       saver, for context;
   (b3) (b2) plus the records any exactly-once design needs, at their
       cheapest (``overhead.FloorBook``): every model call, tool call and cycle close
       journaled with its events in one transaction on a raw DBAPI connection, the
       events appended to the JSONL log through a file kept open; no look-ups, no
       SQLAlchemy. (b3) / (b2) is how much of the 1.25 x the bookkeeping itself uses;
   (c) contreact as it is (``runner.start_run``, its defaults), in each checkpoint
       policy when the config has one (``persistence.checkpoints``), else as shipped.

   Steady state: from the end of cycle 1 to the end of the last cycle, divided by the
   model calls in between (counted at the stub). The runs alternate and the *minimum*
   over repetitions is the figure (other load on the machine only ever adds time);
   the median is printed beside it. CPU is ``time.process_time()`` of this process (all
   its threads, LangGraph's checkpoint writer included; the stub's CPU is its own
   process's). The target (docs/benchmarks.md): (c) CPU <= 1.25 x plain LangGraph with the same
   saver and durability, in the default policy: ``cycle`` against (b2); against (b), the
   floor the cost was first measured against, it is printed too.

2. **KiB per cycle by table** at cycle 10 and at cycle 200 of one 200-cycle
   ``contreact run`` (a child process; the stub runs in this process and measures the
   database from its request hook at step 1 of cycles 1, 11, 190 and 200, while the
   child waits for the model and its last checkpoint is written): per table the
   logical bytes (sum of stored column lengths) and the physical bytes of the table
   with its indexes (SQLite ``dbstat``; PostgreSQL ``pg_total_relation_size``), the
   whole database (SQLite file after a WAL truncation; ``pg_database_size``) and the
   JSONL log. "At cycle 10" = growth over cycles 1-10 / 10; "at cycle 200" = growth
   over cycles 190-199 / 10. Targets: <= 20 KiB per cycle in the ``cycle`` policy and
   <= 45 KiB in ``step``, flat from 10 to 200 (<= 1.1 x).

3. **Resume latency at cycle 200**: the same child run is killed (SIGKILL) at step 2 of
   cycle 200, with the model call in flight; then ``resume_run`` in a fresh process
   whose modules are imported, until its first model request reaches the stub
   (``resume_latency.py``'s method; target <= 0.5 s), and the CLI (``contreact resume``,
   spawn to first request), repeated after further crashes, medians reported.

``--profile`` adds, per backend, where contreact's per-call CPU goes: a cProfile of an
in-process run, self time grouped by component (contreact's own modules by package,
LangGraph, SQLAlchemy, the database driver, LangChain, HTTP, serialization, ...) and the
most expensive functions of contreact's own code, inclusive.
"""

from __future__ import annotations

import cProfile
import pstats
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The shared helpers (common.py, ...) are in benchmarks/, the folder above this one.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import (
    BenchStorage,
    Figure,
    Stamp,
    StampedStub,
    StubProcess,
    bench_storage,
    child_env,
    constant_work_agent,
    constant_work_scenario,
    contreact_cmd,
    median,
    parser,
    print_table,
    report,
    run_config,
    write_yaml,
)
from overhead import Mark, baseline_loop, contreact_loop, langgraph_floor_loop, steady_step_s
from resume_latency import Crasher, crash, resume_cli, resume_in_child

DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/test"
SYNC_FLOOR = "(b) plain LangGraph, 5 nodes, same saver, sync"
CYCLE_FLOOR = "(b2) plain LangGraph, 5 nodes, same saver, once per cycle"
BOOK_FLOOR = "(b3) (b2) + the journal and event log at their floor"
KIB = 1024.0


# ------------------------------------------------------------------------ policies


def policies() -> list[str | None]:
    """The checkpoint policies the config accepts, default first; ``[None]`` if it has none.

    A build without ``persistence.checkpoints: step | cycle`` is measured as shipped.
    """
    from contreact.config import ConfigError, parse_config

    found: list[str | None] = []
    for policy in ("cycle", "step"):
        raw = {"run_id": "probe", "model": "m", "persistence": {"checkpoints": policy}}
        try:
            parse_config(raw, "probe")
        except (ConfigError, ValueError, TypeError):
            continue
        found.append(policy)
    if not found:
        return [None]
    try:
        default = parse_config({"run_id": "probe", "model": "m"}, "probe")
        chosen = getattr(getattr(default, "persistence", None), "checkpoints", None)
    except (ConfigError, ValueError, TypeError):
        chosen = None
    return sorted(found, key=lambda p: p != chosen)


def policy_extra(policy: str | None) -> dict[str, Any]:
    """Config overrides that select ``policy`` (nothing for the shipped default)."""
    return {} if policy is None else {"persistence": {"checkpoints": policy}}


def policy_name(policy: str | None) -> str:
    """How a policy is named in the tables."""
    return "as shipped" if policy is None else f"policy {policy}"


# ------------------------------------------------------------------- 1. per model call


@dataclass
class Level:
    """One level of machinery timed per model call."""

    label: str
    run: Callable[[], list[Mark]]
    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)


def per_call(
    stub: StubProcess, where: BenchStorage, cycles: int, reps: int, pols: list[str | None]
) -> dict[str, Level]:
    """Time every level, alternating, ``reps`` times; seconds per model call in each Level."""
    from contreact.config.sections import DEFAULT_MODEL_OPTIONS

    options = dict(DEFAULT_MODEL_OPTIONS)
    levels = [
        Level("(a) hand-written ChatOllama loop", lambda: baseline_loop(stub.url, cycles, options)),
        Level(
            SYNC_FLOOR,
            lambda: langgraph_floor_loop(stub.url, cycles, where, True),
        ),
        Level(
            CYCLE_FLOOR,
            lambda: langgraph_floor_loop(stub.url, cycles, where, True, per_cycle=True),
        ),
        Level(
            BOOK_FLOOR,
            lambda: langgraph_floor_loop(
                stub.url, cycles, where, True, per_cycle=True, bookkeeping=True
            ),
        ),
        Level(
            "    plain LangGraph, 5 nodes, no saver",
            lambda: langgraph_floor_loop(stub.url, cycles, where, False),
        ),
    ]
    for policy in pols:
        extra = policy_extra(policy)
        levels.append(
            Level(
                f"(c) contreact, {policy_name(policy)}",
                lambda extra=extra: contreact_loop(stub.url, cycles, where, **extra),
            )
        )
    for level in levels:  # warm-up: imports, connections, statement caches
        stub.reset()
        level.run()
    calls: set[int] = set()
    for rep in range(reps):
        order = levels if rep % 2 == 0 else levels[::-1]
        for level in order:
            stub.reset()
            ends = level.run()
            n = len(stub.requests())
            calls.add(n)
            steps = n - n // cycles  # every cycle makes the same calls; cycle 1 is excluded
            level.wall.append(steady_step_s(ends, steps))
            level.cpu.append(steady_step_s(ends, steps, cpu=True))
    if len(calls) != 1:
        raise RuntimeError(f"the levels made different numbers of model calls: {calls}")
    return {level.label: level for level in levels}


# --------------------------------------------------------- 2. storage, 3. resume latency


@dataclass
class Sizes:
    """Database sizes at one moment."""

    logical: dict[str, int]
    """Per table: the sum of the stored lengths of its columns."""
    physical: dict[str, int]
    """Per table: bytes of its pages, indexes included."""
    database: int | None
    """The whole database (SQLite file after a WAL truncation, or pg_database_size)."""
    log: int
    """The run's JSONL log file."""


def measure_sizes(where: BenchStorage, run_id: str) -> Sizes:
    """Read the sizes of ``where`` now (the run must be idle: waiting for the model)."""
    log = where.data_dir / "logs" / f"{run_id}.jsonl"
    log_size = log.stat().st_size if log.exists() else 0
    if where.is_sqlite:
        return _sqlite_sizes(where.sqlite_path, log_size)
    return _postgres_sizes(where, log_size)


def _sqlite_sizes(path: Path, log: int) -> Sizes:
    conn = sqlite3.connect(str(path), timeout=30, isolation_level=None)
    try:
        truncated = False
        for _ in range(50):
            if conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0] == 0:
                truncated = True
                break
            time.sleep(0.01)
        owner = dict(
            conn.execute("SELECT name, tbl_name FROM sqlite_master WHERE type IN ('table','index')")
        )
        logical: dict[str, int] = {}
        for table in sorted(set(owner.values())):
            if table.startswith("sqlite_"):
                continue
            cols = [r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')]
            expr = " + ".join(f'coalesce(length("{c}"), 0)' for c in cols) or "0"
            logical[table] = int(
                conn.execute(f'SELECT coalesce(sum({expr}), 0) FROM "{table}"').fetchone()[0]
            )
        physical: dict[str, int] = defaultdict(int)
        for name, size in conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name"):
            table = owner.get(name, name)
            if table in logical:
                physical[table] += int(size)
    finally:
        conn.close()
    wal = Path(f"{path}-wal")
    database = path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)
    return Sizes(logical, dict(physical), database if truncated else None, log)


def _postgres_sizes(where: BenchStorage, log: int) -> Sizes:
    import psycopg

    assert where.db_url is not None
    url = where.db_url.replace("postgresql+psycopg://", "postgresql://", 1)
    logical: dict[str, int] = {}
    physical: dict[str, int] = {}
    with psycopg.connect(url, autocommit=True) as conn:
        tables = [
            r[0]
            for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        ]
        for table in tables:
            row = conn.execute(
                f"SELECT coalesce(sum(pg_column_size(t.*)), 0), "
                f'pg_total_relation_size(\'"{table}"\') FROM "{table}" t'
            ).fetchone()
            assert row is not None
            logical[table], physical[table] = int(row[0]), int(row[1])
        size = conn.execute("SELECT pg_database_size(current_database())").fetchone()
    return Sizes(logical, physical, int(size[0]) if size else None, log)


@dataclass
class Storage200:
    """The snapshots of one 200-cycle run and its resume latencies."""

    snaps: dict[int, Sizes] = field(default_factory=dict)
    """Sizes at step 1 of cycle c (so: after c-1 whole cycles)."""
    cold: list[float] = field(default_factory=list)
    warm: list[float] = field(default_factory=list)
    cli: list[float] = field(default_factory=list)
    build_s: float = 0.0


def storage_and_resume(
    where: BenchStorage, cycles: int, reps: int, policy: str | None
) -> Storage200:
    """Run ``cycles`` cycles in a child CLI process, snapshot sizes, crash, time resumes."""
    points = sorted({1, 11, cycles - 10, cycles})
    crasher = Crasher()
    out = Storage200()
    run_id = f"cost-{uuid.uuid4().hex[:6]}"

    def hook(stamp: Stamp) -> None:
        if stamp.step == 1 and stamp.cycle in points and stamp.cycle not in out.snaps:
            out.snaps[stamp.cycle] = measure_sizes(where, run_id)
        crasher(stamp)

    with StampedStub(constant_work_agent(100_000), hook=hook) as stub:
        config = write_yaml(
            where.data_dir.parent / f"{run_id}.yaml",
            run_config(run_id, stub.url, cycles, where, **policy_extra(policy)),
        )
        started = time.monotonic()
        proc = subprocess.Popen(
            contreact_cmd(where, "run", str(config), "--quiet"),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=child_env(),
        )
        crasher.arm(proc, cycles, 2)
        proc.wait()
        if proc.returncode != -signal.SIGKILL or not crasher.killed.wait(timeout=10):
            err = proc.stderr.read().decode() if proc.stderr else ""
            raise RuntimeError(f"the run ended (rc {proc.returncode}) before the crash: {err}")
        out.build_s = time.monotonic() - started
        extend = contreact_cmd(where, "resume", run_id, "--cycles", "1", "--quiet")
        cycle = cycles
        for rep in range(reps):
            if rep:
                cycle += 1
                crash(extend, crasher, cycle)
            cold, warm = resume_in_child(where, run_id, stub, False)
            out.cold.append(cold)
            out.warm.append(warm)
            cycle += 2  # the child finished the crashed cycle and added one more
            crash(extend, crasher, cycle)
            out.cli.append(resume_cli(where, run_id, stub)[0])
    return out


def per_cycle(run: Storage200, start: int, end: int, pick: Callable[[Sizes], int | None]) -> float:
    """Mean growth per cycle of ``pick(sizes)`` from step 1 of ``start`` to step 1 of ``end``."""
    a, b = pick(run.snaps[start]), pick(run.snaps[end])
    if a is None or b is None:
        return float("nan")
    return (b - a) / (end - start)


# ---------------------------------------------------------------------------- profile

COMPONENTS: list[tuple[str, str]] = [
    # (path fragment, component); the first match wins
    ("/checkpoints/", "contreact: checkpoints/ (journal, events, registry, saver)"),
    ("/nodes/", "contreact: nodes/"),
    ("/graph/", "contreact: graph/"),
    ("/tools/", "contreact: tools/"),
    ("/contreact/", "contreact: contreact/ (runner, config, analysis)"),
    ("langgraph/checkpoint/", "LangGraph savers (checkpoint serde, SQL)"),
    ("langgraph", "LangGraph loop (pregel, channels, runnables)"),
    ("sqlalchemy", "SQLAlchemy"),
    ("psycopg", "database driver (psycopg)"),
    ("sqlite3", "database driver (sqlite3)"),
    ("langchain_ollama", "LangChain Ollama + ollama client"),
    ("/ollama/", "LangChain Ollama + ollama client"),
    ("langchain_core", "LangChain core (messages, runnables, callbacks)"),
    ("httpx", "HTTP (httpx, httpcore, h11)"),
    ("httpcore", "HTTP (httpx, httpcore, h11)"),
    ("h11", "HTTP (httpx, httpcore, h11)"),
    ("pydantic", "pydantic"),
    ("ormsgpack", "serialization (ormsgpack, json)"),
    ("json", "serialization (ormsgpack, json)"),
    ("threading", "threads, locks, queues"),
    ("concurrent", "threads, locks, queues"),
    ("queue", "threads, locks, queues"),
    ("socket", "sockets, selectors"),
    ("selectors", "sockets, selectors"),
    ("ssl", "sockets, selectors"),
]


def component(filename: str, func: str) -> str:
    """The component a profiled function belongs to."""
    text = filename if filename != "~" else func
    for fragment, name in COMPONENTS:
        if fragment in text:
            return name
    if filename == "~":
        return "builtins (C functions called from Python)"
    return "other Python (stdlib, typing, uuid, ...)"


def profile_contreact(stub: StubProcess, where: BenchStorage, cycles: int) -> None:
    """Profile an in-process contreact run: CPU by component, top own functions.

    Each thread gets its own cProfile profiler timed by ``time.thread_time`` (that
    thread's CPU clock), so blocking waits (the model, the database server, a lock) cost
    nothing and the self times add up to the process's CPU time. LangGraph runs nodes and
    checkpoint writes on worker threads, which join the profile through
    ``threading.setprofile``. The profiler slows Python code several times over, more
    than C code, so shares are indicative; ``py-spy`` gives an undistorted view.
    """
    import threading

    stub.reset()
    profilers: list[cProfile.Profile] = []

    def start_thread_profiler(*_: Any) -> None:
        prof = cProfile.Profile(time.thread_time)
        profilers.append(prof)
        prof.enable()

    from sqlalchemy import event

    from contreact.checkpoints.engines import engine_for
    from contreact.checkpoints.statements import Prepared

    engine = engine_for(where.storage())
    counts: dict[str, int] = defaultdict(int)

    def statement(*_: Any) -> None:
        counts["statements"] += 1

    # Hot-path statements run on the raw DBAPI cursor, which SQLAlchemy's events never see.
    # (`Prepared.sql` is looked up once per execution.)
    prepared_sql = Prepared.sql

    def counted_sql(self: Prepared, dialect: str) -> tuple[str, tuple[str, ...]]:
        counts["statements"] += 1
        return prepared_sql(self, dialect)

    Prepared.sql = counted_sql  # type: ignore[method-assign]

    def checkout(*_: Any) -> None:
        counts["checkouts"] += 1

    def begin(*_: Any) -> None:
        counts["transactions"] += 1

    hooks = [
        (engine, "before_cursor_execute", statement),
        (engine.pool, "checkout", checkout),
        (engine, "begin", begin),
    ]
    for target, name, fn in hooks:
        event.listen(target, name, fn)
    main_prof = cProfile.Profile(time.thread_time)
    profilers.append(main_prof)
    threading.setprofile(start_thread_profiler)
    main_prof.enable()
    try:
        contreact_loop(stub.url, cycles, where)
    finally:
        main_prof.disable()
        threading.setprofile(None)  # type: ignore[arg-type]
        for target, name, fn in hooks:
            event.remove(target, name, fn)
        Prepared.sql = prepared_sql  # type: ignore[method-assign]
    calls = len(stub.requests())
    print(
        f"\ncontreact's own SQL per model call (its engine; the saver's are LangGraph's): "
        f"{counts['statements'] / calls:.1f} statements, {counts['transactions'] / calls:.1f} "
        f"explicit transactions, {counts['checkouts'] / calls:.1f} pool checkouts"
    )
    raw: dict[Any, Any] = pstats.Stats(*profilers).stats  # type: ignore[attr-defined]
    by_component: dict[str, float] = defaultdict(float)
    for (filename, _line, func), (_cc, _nc, tottime, _ct, _callers) in raw.items():
        if "benchmarks" not in filename:  # the benchmark's own loop and stub client
            by_component[component(filename, func)] += tottime
    total = sum(by_component.values())
    print_table(
        ["component (CPU self time, all threads)", "share", "CPU ms/call (profiled)"],
        [
            [name, f"{t / total:.1%}", t / calls * 1000]
            for name, t in sorted(by_component.items(), key=lambda kv: -kv[1])
            if t / total >= 0.005
        ],
        title=f"Where contreact's CPU goes: {cycles} cycles, {calls} model calls, "
        f"{total / calls * 1000:.1f} CPU ms/call under the profiler",
    )
    own = ("/checkpoints/", "/nodes/", "/graph/", "/tools/", "/contreact/")
    top = sorted(
        (
            (ct, nc, f"{Path(fn).parent.name}/{Path(fn).name}:{func}")
            for (fn, _line, func), (_cc, nc, _tt, ct, _callers) in raw.items()
            if any(o in fn for o in own) and "benchmarks" not in fn
        ),
        reverse=True,
    )[:25]
    print_table(
        ["contreact function (inclusive CPU)", "calls/model call", "CPU ms/model call"],
        [[name, nc / calls, ct / calls * 1000] for ct, nc, name in top],
        title="contreact's own functions, inclusive CPU under the profiler "
        "(callers include their callees)",
    )


# ------------------------------------------------------------------------------- main


def backend_figures(
    name: str,
    levels: dict[str, Level],
    pols: list[str | None],
    runs: dict[str | None, Storage200],
    cycles200: int,
) -> list[Figure]:
    """The figures of one backend, with their targets."""
    key = "sq" if name == "SQLite" else "pg"
    figures = []
    for i, policy in enumerate(pols):
        level = levels[f"(c) contreact, {policy_name(policy)}"]
        # Each policy against plain LangGraph saving as often: `cycle` against (b2), one
        # checkpoint per cycle; `step` against (b), every step. The first
        # measurement was against (b), so that ratio is printed for `cycle` too.
        floors = [(SYNC_FLOOR, "sync")]
        if policy == "cycle":
            floors.insert(0, (CYCLE_FLOOR, "once per cycle"))
        for j, (label, how) in enumerate(floors):
            floor = min(levels[label].cpu)
            figures.append(
                Figure(
                    f"{key}-cpu-{policy or 'shipped'}{'' if j == 0 else '-vs-sync'}",
                    f"{name}: contreact CPU/call / plain LangGraph saving {how}, "
                    f"{policy_name(policy)}",
                    min(level.cpu) / floor,
                    "x",
                    1.25 if i == 0 and j == 0 else None,
                    note=f"{floor * 1000:.2f} -> {min(level.cpu) * 1000:.2f} CPU ms/call",
                )
            )
    # How much of the 1.25x the exactly-once design itself uses before any of contreact's
    # logic: (b3) keeps exactly the records the design needs, at their cheapest.
    floor, book = min(levels[CYCLE_FLOOR].cpu), min(levels[BOOK_FLOOR].cpu)
    figures.append(
        Figure(
            f"{key}-cpu-bookkeeping-floor",
            f"{name}: (b3) journal and event log at their floor / (b2), CPU per call",
            book / floor,
            "x",
            None,
            note=f"{floor * 1000:.2f} -> {book * 1000:.2f} CPU ms/call",
        )
    )
    for policy, run in runs.items():
        late = cycles200 - 10

        def db(s: Sizes) -> int | None:
            return s.database

        grow10, grow200 = per_cycle(run, 1, 11, db), per_cycle(run, late, cycles200, db)
        figures.append(
            Figure(
                f"{key}-kib-{policy or 'shipped'}",
                f"{name}: database KiB per 3-call cycle @{cycles200}, {policy_name(policy)}",
                grow200 / KIB,
                "KiB",
                {None: None, "cycle": 20.0, "step": 45.0}.get(policy),
                note=f"@10: {grow10 / KIB:.1f} KiB",
            )
        )
        figures.append(
            Figure(
                f"{key}-flat-{policy or 'shipped'}",
                f"{name}: database growth per cycle @{cycles200} / @10, {policy_name(policy)}",
                grow200 / grow10 if grow10 else None,
                "x",
                1.1,
            )
        )
        figures.append(
            Figure(
                f"{key}-resume-{policy or 'shipped'}",
                f"{name}: resume_run -> first model request @{cycles200}, {policy_name(policy)}",
                median(run.cold),
                "s",
                0.5,
            )
        )
    return figures


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument(
        "--backends",
        default="sqlite,postgres",
        help="comma-separated: sqlite, postgres (default both)",
    )
    p.add_argument("--profile", action="store_true", help="also profile contreact's CPU per call")
    args = p.parse_args()
    pg_url = args.db_url or DEFAULT_PG
    cycles, reps = (4, 2) if args.quick else (12, 7)
    cycles200, resume_reps = (20, 1) if args.quick else (200, 3)
    pols = policies()
    figures: list[Figure] = []
    for backend in [b.strip() for b in args.backends.split(",") if b.strip()]:
        name = {"sqlite": "SQLite", "postgres": "PostgreSQL"}[backend]
        with bench_storage(None if backend == "sqlite" else pg_url) as where:
            workdir = where.data_dir.parent
            with StubProcess(constant_work_scenario(1000), workdir) as stub:
                levels = per_call(stub, where, cycles, reps, pols)
                if args.profile:
                    profile_contreact(stub, where, 30)
        floor = min(levels[SYNC_FLOOR].cpu)
        print_table(
            [
                f"{name}: level",
                "CPU ms/call",
                "x (b)",
                "wall ms/call",
                "CPU median",
                "wall median",
            ],
            [
                [
                    label,
                    min(lv.cpu) * 1000,
                    f"{min(lv.cpu) / floor:.2f}x",
                    min(lv.wall) * 1000,
                    median(lv.cpu) * 1000,
                    median(lv.wall) * 1000,
                ]
                for label, lv in levels.items()
            ],
            title=f"1. per model call on {name}, 0 ms model latency, steady state "
            f"({reps} alternating runs x {cycles} cycles; minimum, and median)",
        )
        runs: dict[str | None, Storage200] = {}
        for policy in pols:
            with bench_storage(None if backend == "sqlite" else pg_url) as where:
                run = runs[policy] = storage_and_resume(where, cycles200, resume_reps, policy)
            print_storage(name, policy, run, cycles200)
        figures += backend_figures(name, levels, pols, runs, cycles200)
    report(figures, args.json)


def print_storage(name: str, policy: str | None, run: Storage200, cycles200: int) -> None:
    """Print the per-table growth and the resume latencies of one 200-cycle run."""
    late = cycles200 - 10
    last = run.snaps[cycles200]
    tables = sorted(last.physical, key=lambda t: -last.physical[t])
    rows: list[list[Any]] = []
    for table in tables:
        logical, physical = _table(table, "logical"), _table(table, "physical")
        rows.append(
            [
                table,
                per_cycle(run, 1, 11, logical) / KIB,
                per_cycle(run, late, cycles200, logical) / KIB,
                per_cycle(run, 1, 11, physical) / KIB,
                per_cycle(run, late, cycles200, physical) / KIB,
            ]
        )
    totals: list[tuple[str, Callable[[Sizes], int | None]]] = [
        ("all tables", lambda s: sum(s.logical.values())),
        ("whole database", lambda s: s.database),
        ("JSONL log", lambda s: s.log),
    ]
    for label, pick in totals:
        a = per_cycle(run, 1, 11, pick) / KIB
        b = per_cycle(run, late, cycles200, pick) / KIB
        if label == "all tables":
            phys_a = per_cycle(run, 1, 11, lambda s: sum(s.physical.values())) / KIB
            phys_b = per_cycle(run, late, cycles200, lambda s: sum(s.physical.values())) / KIB
            rows.append([label, a, b, phys_a, phys_b])
        else:
            rows.append([label, "", "", a, b])
    print_table(
        [
            "table",
            "logical KiB/cycle @10",
            f"@{cycles200}",
            "physical KiB/cycle @10",
            f"@{cycles200}",
        ],
        rows,
        title=f"2. storage per 3-call cycle on {name}, contreact {policy_name(policy)} "
        f"(@10: cycles 1-10; @{cycles200}: cycles {late}-{cycles200 - 1}; run built in "
        f"{run.build_s:.1f} s)",
    )
    print_table(
        ["measure", "median s", "samples s"],
        [
            ["resume_run -> first model request (fresh process)", median(run.cold), _s(run.cold)],
            ["same, warm (second resume in that process)", median(run.warm), _s(run.warm)],
            ["CLI `contreact resume`: spawn -> first request", median(run.cli), _s(run.cli)],
        ],
        title=f"3. resume after a kill -9 at cycle {cycles200} on {name}, "
        f"contreact {policy_name(policy)}",
    )


def _table(table: str, kind: str) -> Callable[[Sizes], int]:
    """Picks one table's logical or physical bytes from a `Sizes`."""
    return lambda sizes: getattr(sizes, kind).get(table, 0)


def _s(samples: list[float]) -> str:
    return " ".join(f"{v:.3f}" for v in samples)


if __name__ == "__main__":
    main()
