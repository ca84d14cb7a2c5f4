"""contreact against plain LangGraph's floor: per-call cost, storage per cycle, resume (issue 13).

Issue 13 asks whether contreact's exactly-once machinery (journal, events, registry,
budgets) can cost next to nothing over the LangGraph graph it runs on. This script prints
every figure the issue's "must show" names, on SQLite and on PostgreSQL, in one run:

1. **CPU and wall ms per model call** at 0 ms model latency, steady state (end of cycle 1
   to the last cycle's end, divided by the model calls in between), for
   (a) the hand-written ``ChatOllama`` loop of ``overhead.py``, (b) the same five nodes in
   plain LangGraph without a saver and with the storage's own saver and
   ``durability="sync"`` (and ``"exit"``, the floor of a design that checkpoints less
   than every superstep), (c) contreact, in each checkpoint policy the config offers
   (``persistence.checkpoints: step | cycle`` once it exists; today: contreact as it is).
   The variants alternate within each repetition so all see the same machine load; the
   figure is the *minimum* over repetitions (other load only ever adds time), the median
   is printed too. CPU is this process's ``process_time()`` (the stub runs in a child
   process, so its work is not counted); it is far less sensitive to other load than
   wall time.
2. **KiB per cycle by table** at cycles 10 and 200 of a 200-cycle run of the constant-work
   agent (``common.CONSTANT_CYCLE``: 3 model calls, 2 tool calls, one key overwritten), for
   each policy and for plain LangGraph with the same saver: logical bytes per table
   (``storage_growth.Measurer``), and the whole database (SQLite file + WAL after a
   TRUNCATE checkpoint; ``pg_database_size``). Bytes per cycle at cycle N = growth over
   cycles (N-10, N] / 10.
3. **Resume latency at cycle 200**: the 200-cycle run is extended by one cycle with
   ``contreact resume --cycles 1`` in a child process that is SIGKILLed the moment the
   stub receives that cycle's first model request (a model call in flight); a fresh
   interpreter with the modules imported then calls ``resume_run`` and the figure is the
   time to its first model request (``resume_latency.resume_in_child``). Repeated, median.
   Every model request is counted at the stub: after the kills and resumes, the count must
   equal the uninterrupted run's plus exactly one per kill (the call that was in flight).

Run: ``.venv/bin/python benchmarks/floor.py`` (both backends, ~4-6 minutes on 2 busy cores),
``--quick`` (a smoke version), ``--backends sqlite``, ``--db-url URL`` (the PostgreSQL
server to create a throwaway database on; default ``$CONTREACT_TEST_PG`` or the local
``postgresql://postgres@127.0.0.1:5432/test``), ``--json PATH``.
"""

from __future__ import annotations

import os
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common import (
    BenchStorage,
    Figure,
    StampedStub,
    StubProcess,
    bench_storage,
    constant_work_agent,
    constant_work_scenario,
    contreact_cmd,
    median,
    now,
    parser,
    print_table,
    report,
    run_config,
)
from overhead import CycleClock, Mark, baseline_loop, langgraph_floor_loop, steady_step_s
from resume_latency import Crasher, crash, resume_in_child
from storage_growth import CHECKPOINT_TABLES, Measurer, Snapshot, event_bytes_by_type

from contreact.runner import SilentProgress

DEFAULT_PG = os.environ.get("CONTREACT_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")
CALLS_PER_CYCLE = 3
"""Model calls per cycle of the constant-work agent (write, read, answer)."""

HAND = "hand-written ChatOllama loop"
NO_SAVER = "plain LangGraph, 5 nodes, no saver"
FLOOR = "plain LangGraph, 5 nodes, same saver, sync"
FLOOR_EXIT = 'plain LangGraph, 5 nodes, same saver, durability="exit"'

TARGET_CPU_RATIO = 1.25
TARGET_KIB = {"cycle": 20.0, "step": 45.0}
TARGET_FLAT = 1.1
TARGET_RESUME_S = 0.5


# ------------------------------------------------------------------- checkpoint policy


def policies() -> tuple[list[str | None], str | None]:
    """The checkpoint policies the config accepts, and the default one.

    Returns:
        ``(["step", "cycle"], default)`` once ``persistence.checkpoints`` exists in the
        config; ``([None], None)`` before (contreact as it is: every superstep).
    """
    from contreact.config import parse_config

    probe = BenchStorage(Path("/nonexistent"))
    base = run_config("probe", "http://127.0.0.1:1", 1, probe)
    try:
        for name in ("step", "cycle"):
            parse_config({**base, "persistence": {"checkpoints": name}}, "probe")
    except Exception:
        return [None], None
    config: Any = parse_config(base, "probe")
    default = getattr(getattr(config, "persistence", None), "checkpoints", None)
    return ["step", "cycle"], str(default) if default else None


def policy_extra(policy: str | None) -> dict[str, Any]:
    """Config keys that select ``policy`` (nothing for contreact without the setting)."""
    return {} if policy is None else {"persistence": {"checkpoints": policy}}


def contreact_label(policy: str | None, default: str | None) -> str:
    """Row label of contreact in ``policy``."""
    if policy is None:
        return "contreact as on main (checkpoint every superstep)"
    return f"contreact, checkpoints: {policy}{' (default)' if policy == default else ''}"


def policy_target(policy: str | None) -> float:
    """The KiB-per-cycle target of a policy (today's contreact checkpoints every step)."""
    return TARGET_KIB["step" if policy is None else policy]


# --------------------------------------------------------------------------- per call


def run_contreact(host: str, cycles: int, where: BenchStorage, policy: str | None) -> list[Mark]:
    """Run contreact in this process for ``cycles`` cycles; clock readings at cycle ends."""
    from contreact.config import parse_config
    from contreact.runner import start_run

    clock = CycleClock()
    run_id = f"floor-{uuid.uuid4().hex[:8]}"
    config = parse_config(
        run_config(run_id, host, cycles, where, **policy_extra(policy)), "benchmark"
    )
    outcome = start_run(config, where.storage(), progress=clock)
    if outcome.status != "completed":
        raise RuntimeError(f"contreact run ended {outcome.status}: {outcome.reason}")
    return clock.ends


@dataclass
class PerCall:
    """Per-model-call seconds of each variant, one value per repetition."""

    wall: dict[str, list[float]] = field(default_factory=dict)
    cpu: dict[str, list[float]] = field(default_factory=dict)

    def best(self, name: str, cpu: bool) -> float:
        """Minimum over repetitions, in ms."""
        return min((self.cpu if cpu else self.wall)[name]) * 1000

    def mid(self, name: str, cpu: bool) -> float:
        """Median over repetitions, in ms."""
        return median((self.cpu if cpu else self.wall)[name]) * 1000


def per_call(
    where: BenchStorage, pols: list[str | None], default: str | None, cycles: int, reps: int
) -> PerCall:
    """Time every variant ``reps`` times, alternating, against one stub process."""
    from graph.state import default_model_options

    options = default_model_options()
    with StubProcess(constant_work_scenario(100_000), where.data_dir.parent) as stub:
        url = stub.url

        def variants(n: int) -> list[tuple[str, Callable[[], list[Mark]]]]:
            out: list[tuple[str, Callable[[], list[Mark]]]] = [
                (HAND, lambda: baseline_loop(url, n, options)),
                (NO_SAVER, lambda: langgraph_floor_loop(url, n, where, False)),
                (FLOOR, lambda: langgraph_floor_loop(url, n, where, True)),
                (FLOOR_EXIT, lambda: langgraph_floor_loop(url, n, where, True, "exit")),
            ]
            for policy in pols:
                out.append(
                    (
                        contreact_label(policy, default),
                        lambda p=policy: run_contreact(url, n, where, p),  # type: ignore[misc]
                    )
                )
            return out

        for _, warm in variants(2):  # imports, connections, statement caches: not measured
            warm()
        result = PerCall()
        for rep in range(reps):
            chosen = variants(cycles)
            for name, run in chosen if rep % 2 == 0 else chosen[::-1]:
                stub.reset()
                ends = run()
                calls = len(stub.requests())
                if calls != CALLS_PER_CYCLE * cycles:
                    raise RuntimeError(f"{name}: {calls} model calls for {cycles} cycles")
                steps = calls - CALLS_PER_CYCLE
                result.wall.setdefault(name, []).append(steady_step_s(ends, steps))
                result.cpu.setdefault(name, []).append(steady_step_s(ends, steps, cpu=True))
    return result


# ------------------------------------------------------------------ storage and resume


class PointSnapshots(SilentProgress):
    """A runner `Progress` that measures the storage at the end of chosen cycles only."""

    def __init__(self, measurer: Measurer, at: set[int]) -> None:
        self.measurer = measurer
        self.at = at
        self.cycle = 0
        self.snaps: dict[int, Snapshot] = {}

    def started(self, record: Any, state: Any, resumed: bool) -> None:
        """Cycle 0: the registered run before any cycle."""
        if 0 in self.at:
            self.snaps[0] = self.measurer.snapshot(0)

    def update(self, node: str, update: dict[str, Any]) -> None:
        """Count cycle ends; measure at the chosen ones."""
        if node == "reflect":
            self.cycle += 1
            if self.cycle in self.at:
                self.snaps[self.cycle] = self.measurer.snapshot(self.cycle)


def snapshot_cycles(points: list[int], window: int) -> set[int]:
    """Cycles to measure so that each point's window (point-window, point] is known."""
    return {c for p in points for c in (max(0, p - window), p)}


@dataclass
class Growth:
    """Bytes per cycle by table, and of the whole database, at each measured point."""

    label: str
    by_table: dict[int, dict[str, float]]
    physical: dict[int, float]
    events: dict[str, dict[int, int]] = field(default_factory=dict)
    """Event payload bytes by event type in the single cycles ``points`` (contreact only)."""

    def logical(self, point: int) -> float:
        """All tables' logical bytes per cycle at ``point``."""
        return sum(self.by_table[point].values())

    def checkpoint(self, point: int) -> float:
        """LangGraph's checkpoint tables' logical bytes per cycle at ``point``."""
        return sum(v for k, v in self.by_table[point].items() if k in CHECKPOINT_TABLES)


def growth_of(label: str, snaps: dict[int, Snapshot], points: list[int], window: int) -> Growth:
    """Per-cycle growth at each point from the snapshots around it."""
    by_table: dict[int, dict[str, float]] = {}
    physical: dict[int, float] = {}
    for p in points:
        end, start = snaps[p], snaps[max(0, p - window)]
        n = end.cycle - start.cycle
        names = set(end.tables) | set(start.tables)
        by_table[p] = {t: (end.tables.get(t, 0) - start.tables.get(t, 0)) / n for t in names}
        physical[p] = (end.physical - start.physical) / n
    return Growth(label, by_table, physical)


@dataclass
class Resume:
    """Resume latencies and the model-request count check of one policy."""

    cold: list[float]
    warm: list[float]
    requests: int
    cycles: int
    kills: int

    @property
    def extra_requests(self) -> int:
        """Model requests beyond the uninterrupted run's."""
        return self.requests - CALLS_PER_CYCLE * self.cycles


def storage_and_resume(
    where: BenchStorage,
    policy: str | None,
    label: str,
    points: list[int],
    window: int,
    resumes: int,
) -> tuple[Growth, Resume]:
    """One long run of ``policy``: its growth per cycle, then crash/resume at its end."""
    from contreact.config import parse_config
    from contreact.runner import start_run

    cycles = points[-1]
    crasher = Crasher()
    with StampedStub(constant_work_agent(100_000), hook=crasher) as stub:
        run_id = f"growth-{uuid.uuid4().hex[:6]}"
        progress = PointSnapshots(Measurer(where, run_id), snapshot_cycles(points, window))
        config = parse_config(
            run_config(run_id, stub.url, cycles, where, **policy_extra(policy)), "benchmark"
        )
        started = now()
        outcome = start_run(config, where.storage(), progress=progress)
        if outcome.status != "completed":
            raise RuntimeError(f"run ended {outcome.status}: {outcome.reason}")
        print(f"  {label}: {cycles} cycles in {now() - started:.1f} s", flush=True)
        growth = growth_of(label, progress.snaps, points, window)
        growth.events = event_bytes_by_type(where, run_id, points)
        from checkpoints.db import dispose_engines

        dispose_engines()  # the children below open the database on their own
        extend = contreact_cmd(where, "resume", run_id, "--cycles", "1", "--quiet")
        cold: list[float] = []
        warm: list[float] = []
        cycle = cycles
        for _ in range(resumes):
            cycle += 1
            crash(extend, crasher, cycle)  # SIGKILL with the cycle's first model call in flight
            c, w = resume_in_child(where, run_id, stub, False)  # finishes it, adds one more
            cold.append(c)
            warm.append(w)
            cycle += 1
        stamps = list(stub.agent.stamps)
    per_cycle = Counter(s.cycle for s in stamps)
    if sorted(per_cycle) != list(range(1, cycle + 1)):
        raise RuntimeError(f"cycles seen by the stub: {sorted(per_cycle)}")
    return growth, Resume(cold, warm, len(stamps), cycle, resumes)


def floor_growth(where: BenchStorage, points: list[int], window: int) -> Growth:
    """Plain LangGraph (same five nodes, same saver, sync): its growth per cycle."""
    measurer = Measurer(where, "no-such-run")
    at = snapshot_cycles(points, window)
    snaps: dict[int, Snapshot] = {}
    if 0 in at:
        snaps[0] = measurer.snapshot(0)

    def on_cycle(cycle: int) -> None:
        if cycle in at:
            snaps[cycle] = measurer.snapshot(cycle)

    with StubProcess(constant_work_scenario(100_000), where.data_dir.parent) as stub:
        langgraph_floor_loop(stub.url, points[-1], where, True, on_cycle=on_cycle)
    return growth_of(FLOOR, snaps, points, window)


# ---------------------------------------------------------------------------- profile

COMPONENTS: list[tuple[str, tuple[str, ...]]] = [
    # (component, fragments of a function's file name or, for built-ins, of its name)
    (
        "waiting (locks, queues, futures, socket reads)",
        ("acquire' of '_thread", "_queue.SimpleQueue", "'recv_into'", "poll'", "time.sleep"),
    ),
    ("contreact checkpoints/ (journal, events, registry, db)", ("/checkpoints/",)),
    ("contreact nodes/", ("/nodes/",)),
    ("contreact tools/", ("/tools/",)),
    ("contreact graph/", ("/graph/",)),
    ("contreact runner, config, analysis", ("/contreact/",)),
    ("SQLAlchemy", ("/sqlalchemy/",)),
    ("sqlite3 driver (C calls)", ("sqlite3",)),
    ("psycopg driver", ("psycopg",)),
    ("LangGraph checkpoint savers + serde", ("/langgraph/checkpoint/", "ormsgpack")),
    ("LangGraph Pregel loop, channels, stream", ("/langgraph/",)),
    ("LangChain core (messages, runnables, callbacks)", ("/langchain_core/",)),
    (
        "ChatOllama, ollama client, HTTP",
        ("/langchain_ollama/", "/ollama/", "/httpx/", "/httpcore/", "/h11/", "socket", "_ssl"),
    ),
    ("pydantic", ("pydantic",)),
    ("json, orjson, uuid, logging, other stdlib", ("",)),
]
"""Where a profiled function's own time goes: the first component whose fragment matches."""


def component(key: tuple[str, int, str]) -> str:
    """The :data:`COMPONENTS` entry of a pstats function key (file, line, name)."""
    filename, _, name = key
    text = name if filename == "~" else filename.replace("\\", "/")
    if filename != "~" and filename.endswith(("threading.py", "queue.py")):
        return COMPONENTS[0][0]
    for label, fragments in COMPONENTS:
        if any(f in text for f in fragments):
            return label
    return COMPONENTS[-1][0]


OWN_CODE = tuple(f"/{d}/" for d in ("checkpoints", "nodes", "tools", "graph", "contreact"))
"""contreact's own source folders (functions listed by cumulative time in ``--profile``)."""


def profiled(run: Callable[[], Any], calls: int, top: int = 0) -> dict[str, float]:
    """Own (tottime) seconds per component of ``run()``, over every thread it starts.

    With ``top``, also print contreact's own functions with the most cumulative time
    (per model call: ``calls`` model calls in the run).

    cProfile watches only the thread that enables it; LangGraph writes checkpoints from
    worker threads, so every thread started during the run gets its own profiler.
    """
    import cProfile
    import pstats
    import sys
    import threading

    profiles = [cProfile.Profile()]

    def hook(*_: Any) -> None:
        sys.setprofile(None)
        prof = cProfile.Profile()
        profiles.append(prof)
        prof.enable()

    threading.setprofile(hook)
    profiles[0].enable()
    try:
        run()
    finally:
        profiles[0].disable()
        threading.setprofile(None)  # type: ignore[arg-type]
    stats = pstats.Stats(profiles[0])
    for prof in profiles[1:]:
        stats.add(prof)
    out: dict[str, float] = {}
    rest: list[tuple[float, Any]] = []
    for key, (_, _, own, _, _) in stats.stats.items():  # type: ignore[attr-defined]
        out[component(key)] = out.get(component(key), 0.0) + own
        if component(key) == COMPONENTS[-1][0]:
            rest.append((own, key))
    if top:
        own_fns = [
            (cum, key, n)
            for key, (_, n, _, cum, _) in stats.stats.items()  # type: ignore[attr-defined]
            if any(d in key[0] for d in OWN_CODE) and "/benchmarks/" not in key[0]
        ]
        print_table(
            ["contreact function (cumulative, profiled)", "calls/model call", "ms/model call"],
            [
                [f"{Path(k[0]).parent.name}/{Path(k[0]).name}:{k[2]}", n / calls, c / calls * 1000]
                for c, k, n in sorted(own_fns, key=lambda r: r[0], reverse=True)[:top]
            ],
            title="contreact's own functions by cumulative time (nested rows overlap)",
        )
    if os.environ.get("FLOOR_DEBUG"):
        for own, key in sorted(rest, key=lambda r: r[0], reverse=True)[:15]:
            print(f"    {own:8.3f} s  {key}")
    return out


def timed_run(
    url: str, cycles: int, where: BenchStorage, policy: str | None, default: str | None
) -> None:
    """Print the wall time of contreact's engine functions per model call (``timers.py``).

    The wrappers cost about a microsecond a call, so unlike cProfile these are close to
    the unprofiled times. Steady state: cycle 1 (set-up) is left out of the per-call
    figure only for the whole-step row; the timed functions count every call.
    """
    from timers import Timers

    calls = CALLS_PER_CYCLE * cycles
    started = now()
    with Timers() as timers:
        run_contreact(url, cycles, where, policy)
    step_ms = (now() - started) / calls * 1000
    rows = timers.rows(calls, step_ms)
    rest = step_ms - timers.top_level_ms(calls)
    rows.append(
        ["rest: LangGraph loop, channels, node glue, runner", "", rest, f"{rest / step_ms:.0%}"]
    )
    rows.append(["whole run / model calls (incl. set-up)", calls, step_ms, "100%"])
    print_table(
        [
            "engine function (inclusive wall time; indented = inside the row above)",
            "calls",
            "ms/call",
            "share",
        ],
        rows,
        title=f"{contreact_label(policy, default)}: {cycles} cycles, {calls} model calls, "
        "engine functions timed (benchmarks/timers.py)",
    )


def profile(where: BenchStorage, pols: list[str | None], default: str | None, cycles: int) -> None:
    """Print, per model call, where contreact's and plain LangGraph's time goes (cProfile)."""
    calls = CALLS_PER_CYCLE * cycles
    with StubProcess(constant_work_scenario(100_000), where.data_dir.parent) as stub:
        url = stub.url
        runs: list[tuple[str, Callable[[], Any]]] = [
            (FLOOR, lambda: langgraph_floor_loop(url, cycles, where, True)),
        ]
        runs += [
            (contreact_label(p, default), lambda p=p: run_contreact(url, cycles, where, p))  # type: ignore[misc]
            for p in pols
        ]
        for _, run in runs:
            run()  # warm: imports, connections, caches
        for policy in pols:
            timed_run(url, cycles, where, policy, default)
        result = {name: profiled(run, calls, 0 if name == FLOOR else 25) for name, run in runs}
    names = [name for name, _ in runs]
    rows = []
    for label, _ in COMPONENTS:
        ms = [result[n].get(label, 0.0) / calls * 1000 for n in names]
        rows.append([label, *ms, *[m - ms[0] for m in ms[1:]]])
    busy = [
        sum(v for k, v in result[n].items() if k != COMPONENTS[0][0]) / calls * 1000 for n in names
    ]
    rows.append(["all but waiting", *busy, *[b - busy[0] for b in busy[1:]]])
    print_table(
        ["component (own time, all threads)"]
        + [f"{_short(n)} ms/call" for n in names]
        + [f"{_short(n)} - LangGraph" for n in names[1:]],
        rows,
        title=f"cProfile of one {cycles}-cycle run each ({calls} model calls; the profiler "
        "inflates Python-heavy code ~2x: read the columns against each other)",
    )


# ------------------------------------------------------------------------------ report


def backend_report(
    backend: str,
    timing: PerCall,
    growths: list[Growth],
    resumes: dict[str, Resume],
    pols: list[str | None],
    default: str | None,
    points: list[int],
) -> list[Figure]:
    """Print one backend's tables; return its figures."""
    floor_cpu = timing.best(FLOOR, cpu=True)
    print_table(
        [
            "variant (0 ms model latency)",
            "CPU ms/call min",
            "median",
            "wall ms/call min",
            "median",
            "CPU / floor",
        ],
        [
            [
                name,
                timing.best(name, True),
                timing.mid(name, True),
                timing.best(name, False),
                timing.mid(name, False),
                f"{timing.best(name, True) / floor_cpu:.2f}x",
            ]
            for name in timing.cpu
        ],
        title=f"[{backend}] per model call, steady state "
        f"({len(timing.cpu[HAND])} alternating repetitions; floor = {FLOOR})",
    )
    first, last = points[0], points[-1]
    tables = sorted(
        {t for g in growths for t in g.by_table[last]},
        key=lambda t: -max(g.by_table[last].get(t, 0) for g in growths),
    )
    rows: list[list[Any]] = []
    for t in tables:
        rows.append([t] + [g.by_table[p].get(t, 0) / 1024 for g in growths for p in (first, last)])
    rows.append(
        ["all tables (logical)"] + [g.logical(p) / 1024 for g in growths for p in (first, last)]
    )
    physical = "database file + WAL" if backend == "SQLite" else "pg_database_size"
    rows.append([physical] + [g.physical[p] / 1024 for g in growths for p in (first, last)])
    print_table(
        ["table"] + [f"{_short(g.label)} @{p}" for g in growths for p in (first, last)],
        rows,
        title=f"[{backend}] KiB per cycle by table (logical bytes; growth over the 10 cycles "
        f"ending at the cycle shown). Columns: "
        + "; ".join(f"{_short(g.label)} = {g.label}" for g in growths),
    )
    for g in growths:
        if g.events:
            print_table(
                ["event type", f"payload B in cycle {first}", f"in cycle {last}"],
                [[k, v.get(first, 0), v.get(last, 0)] for k, v in sorted(g.events.items())],
                title=f"[{backend}] event payload bytes by type, {g.label}",
            )
    print_table(
        [
            "policy",
            f"resume @{last} median s",
            "samples s",
            "warm s",
            "model requests",
            "uninterrupted",
            "kills",
            "extra",
        ],
        [
            [
                label,
                median(r.cold),
                " ".join(f"{v:.3f}" for v in r.cold),
                median(r.warm),
                r.requests,
                CALLS_PER_CYCLE * r.cycles,
                r.kills,
                r.extra_requests,
            ]
            for label, r in resumes.items()
        ],
        title=f"[{backend}] resume after SIGKILL at cycle {last}+ (fresh process, modules "
        "imported) "
        "and model requests counted at the stub",
    )
    figures: list[Figure] = []
    key = backend[:2].lower()
    for name in timing.cpu:
        figures.append(
            Figure(
                f"{key}-cpu",
                f"{backend}: CPU ms/call, {name}",
                timing.best(name, True),
                "ms",
                note=f"wall {timing.best(name, False):.2f} ms",
            )
        )
    for policy in pols:
        label = contreact_label(policy, default)
        figures.append(
            Figure(
                f"{key}-1",
                f"{backend}: CPU/call {label} / plain LangGraph, same saver, sync",
                timing.best(label, True) / floor_cpu,
                "x",
                TARGET_CPU_RATIO if policy == default else None,
            )
        )
    for g, policy in zip(growths, [*pols, "floor"], strict=True):
        if g.label == FLOOR:
            figures.append(
                Figure(
                    f"{key}-2",
                    f"{backend}: KiB/cycle @{last}, {FLOOR}",
                    g.physical[last] / 1024,
                    "KiB",
                )
            )
            continue
        figures.append(
            Figure(
                f"{key}-2",
                f"{backend}: database KiB/cycle @{last}, {g.label}",
                g.physical[last] / 1024,
                "KiB",
                policy_target(policy),
                note=f"logical {g.logical(last) / 1024:.1f} KiB",
            )
        )
        figures.append(
            Figure(
                f"{key}-2f",
                f"{backend}: database bytes/cycle @{last} / @{first}, {g.label}",
                g.physical[last] / g.physical[first],
                "x",
                TARGET_FLAT,
                note=f"logical {g.logical(last) / g.logical(first):.2f}x",
            )
        )
    for label, r in resumes.items():
        figures.append(
            Figure(
                f"{key}-3",
                f"{backend}: resume @{last} -> first model request, {label}",
                median(r.cold),
                "s",
                TARGET_RESUME_S,
            )
        )
        figures.append(
            Figure(
                f"{key}-3r",
                f"{backend}: model requests beyond uninterrupted, {r.kills} kill(s), {label}",
                r.extra_requests,
                "",
                float(r.kills),
            )
        )
    return figures


def _short(label: str) -> str:
    if label == FLOOR:
        return "LangGraph"
    return label.split(":")[-1].split("(")[0].strip() if ":" in label else "contreact"


# -------------------------------------------------------------------------------- main


def pg_reachable(url: str) -> str | None:
    """None if the PostgreSQL server answers, else why not."""
    try:
        import psycopg

        with psycopg.connect(
            url.replace("postgresql+psycopg://", "postgresql://"), connect_timeout=3
        ):
            return None
    except Exception as exc:
        return str(exc).splitlines()[0]


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument(
        "--profile", action="store_true", help="only: cProfile contreact against the floor"
    )
    p.add_argument(
        "--backends", default="sqlite,postgresql", help="comma-separated: sqlite,postgresql"
    )
    args = p.parse_args()
    if args.quick:
        cycles, reps, points, resumes = 3, 2, [10, 20], 1
    else:
        cycles, reps, points, resumes = 10, 5, [10, 200], 3
    window = 10
    pols, default = policies()
    print(
        "checkpoint policies: "
        + (
            ", ".join(f"{p}{' (default)' if p == default else ''}" for p in pols if p)
            if pols != [None]
            else "none yet (persistence.checkpoints not in the config): contreact as on main"
        )
        + f"; load average {os.getloadavg()[0]:.1f}; {os.cpu_count()} CPUs",
        flush=True,
    )
    figures: list[Figure] = []
    for backend in args.backends.split(","):
        pg = backend.startswith("p")
        name = "PostgreSQL" if pg else "SQLite"
        server = args.db_url or DEFAULT_PG
        if pg and (why := pg_reachable(server)):
            print(f"\n[{name}] skipped: {why}")
            continue
        print(f"\n=== {name}", flush=True)
        with bench_storage(server if pg else None) as where:
            if args.profile:
                profile(where, pols, default, 10 if args.quick else 30)
                continue
            started = now()
            timing = per_call(where, pols, default, cycles, reps)
            print(f"  per-call timing: {now() - started:.0f} s", flush=True)
            growths: list[Growth] = []
            resumed: dict[str, Resume] = {}
            for policy in pols:
                label = contreact_label(policy, default)
                g, r = storage_and_resume(where, policy, label, points, window, resumes)
                growths.append(g)
                resumed[label] = r
            growths.append(floor_growth(where, points, window))
            figures += backend_report(name, timing, growths, resumed, pols, default, points)
    print(f"\nload average at the end {os.getloadavg()[0]:.1f}")
    if figures:
        report(figures, args.json)


if __name__ == "__main__":
    main()
