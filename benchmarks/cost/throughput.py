"""(e) Throughput of 1, 4 and 8 concurrent runs on one SQLite file, at 100 ms model latency.

What it measures: model steps per second across all runs when 1, 4 or 8 runs share one
data directory (one SQLite database in WAL mode, as a batch would), and how that scales:
with a 100 ms model, 8 runs should make close to 8 times the steps of one run unless the
framework serializes them (database locks, CPU per step).

How: each run is a separate ``contreact run CONFIG`` process (the way a researcher
starts several runs, and the only way to use more than one core: runs in threads of one
interpreter would share its GIL). All processes start together against one stub server
(in this process, 100 ms added to every chat request, answering from threads) playing
the constant-work script of ``common.CONSTANT_CYCLE`` (three model calls per cycle).
Each run uses its own model name so the stub's request stamps (``time.monotonic()``)
tell the runs apart. The stub holds each run's first model request until every run has
sent one (interpreter start-up takes 1-3 s and varies), so the runs start stepping
together. Throughput is counted in the steady window in which every run is active -
from that common start to the first run's last model request - as model requests
arriving in the window divided by its length, which leaves out interpreter start-up
and teardown. Whole-process throughput (all steps / spawn-to-last-exit) is
printed too, with the CPU the run processes used (in cores, from ``RUSAGE_CHILDREN``;
interpreter start-up included). The target compares 8 runs with 1 (>= 6x). As a
control, the full version also runs 8 runs with one SQLite file each: if that is no
faster, the shared database is not what limits throughput. With ``--db-url`` all runs
share one PostgreSQL database instead.
"""

from __future__ import annotations

import resource
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

# The shared helpers (common.py, ...) are in benchmarks/, the folder above this one.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import (
    BenchStorage,
    Figure,
    Stamp,
    StampedStub,
    bench_storage,
    constant_work_agent,
    contreact_cmd,
    median,
    parser,
    print_table,
    report,
    run_at_once,
    run_config,
    write_yaml,
)

LATENCY_MS = 100.0


@dataclass
class Batch:
    """One measurement: ``runs`` concurrent runs."""

    runs: int
    steady: float
    """Model steps per second in the window where all runs were active."""
    whole: float
    """All model steps / (spawn to last exit)."""
    window_s: float
    steps: int
    cores: float
    """CPU seconds the run processes used (start-up included) per second of wall time."""


@dataclass
class StartLine:
    """A stub hook that holds each run's first model request until every run has sent one.

    Interpreter start-up takes 1-3 s and varies with load; without a common start the
    window in which all runs are active can be short or empty.
    """

    models: set[str] = field(default_factory=set)
    barrier: threading.Barrier | None = None
    released: float = 0.0

    def arm(self, models: list[str]) -> None:
        """Expect the first requests of ``models``."""
        self.models = set(models)
        self.barrier = threading.Barrier(len(models), timeout=120)
        self.released = 0.0

    def __call__(self, stamp: Stamp) -> None:
        """Block a run's first request until all runs are at the line."""
        model = stamp.model.split(":")[0]
        if self.barrier is not None and model in self.models:
            self.models.discard(model)
            self.barrier.wait()
            self.released = max(self.released, time.monotonic())


def run_batch(
    stub: StampedStub,
    start: StartLine,
    where: BenchStorage,
    runs: int,
    cycles: int,
    *,
    separate_files: bool = False,
) -> Batch:
    """Start ``runs`` `contreact run` processes at once and measure their throughput.

    Args:
        stub: The stamped stub.
        start: Its start-line hook.
        where: The shared storage.
        runs: How many runs.
        cycles: Cycles per run.
        separate_files: Give each run its own SQLite data directory instead (a control:
            if throughput is the same, the shared file is not what limits it).
    """
    tag = uuid.uuid4().hex[:6]
    models = [f"bench-{i}" for i in range(1, runs + 1)]
    start.arm(models)
    commands = []
    for model in models:
        place = (
            BenchStorage(where.data_dir.parent / f"own-{tag}-{model}") if separate_files else where
        )
        config = run_config(f"tp-{tag}-{model}", stub.url, cycles, place, model=model)
        path = write_yaml(where.data_dir.parent / f"{tag}-{model}.yaml", config)
        commands.append(contreact_cmd(place, "run", str(path), "--quiet"))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    run_at_once(commands)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    stamps = [s for s in stub.agent.since(t0) if s.model.split(":")[0] in models]
    per_model = {m: [s.at for s in stamps if s.model.split(":")[0] == m] for m in models}
    begin = start.released
    end = min(max(times) for times in per_model.values())
    # Requests arriving after the common start, up to the first run's last request:
    # each one closes a step that ran entirely inside the window.
    inside = sum(1 for s in stamps if begin < s.at <= end)
    window = end - begin
    steady = inside / window if window > 0 else 0.0
    return Batch(runs, steady, len(stamps) / wall, window, len(stamps), cpu / wall)


def main() -> None:
    args = parser(__doc__.splitlines()[0]).parse_args()
    cycles, reps = (3, 1) if args.quick else (24, 2)
    counts = [1, 4] if args.quick else [1, 4, 8]
    results: dict[int | str, list[Batch]] = {n: [] for n in counts}
    control = not args.quick and args.db_url is None
    if control:
        results["8, one SQLite file each"] = []
    models = [f"bench-{i}" for i in range(1, max(counts) + 1)]
    start = StartLine()
    with (
        bench_storage(args.db_url) as where,
        StampedStub(
            constant_work_agent(cycles), latency_ms=LATENCY_MS, models=models, hook=start
        ) as stub,
    ):
        for _ in range(reps):
            for n in counts:
                results[n].append(run_batch(stub, start, where, n, cycles))
            if control:
                results["8, one SQLite file each"].append(
                    run_batch(stub, start, where, 8, cycles, separate_files=True)
                )
    one = median([b.steady for b in results[1]])
    rows = []
    for key, batches in results.items():
        steady = median([b.steady for b in batches])
        rows.append(
            [
                key,
                steady,
                f"{steady / one:.2f}x",
                median([b.whole for b in batches]),
                median([b.window_s for b in batches]),
                median([float(b.steps) for b in batches]),
                median([b.cores for b in batches]),
            ]
        )
    print_table(
        [
            "concurrent runs",
            "steps/s (steady)",
            "vs 1 run",
            "steps/s (whole processes)",
            "window s",
            "steps",
            "CPU cores used by the runs",
        ],
        rows,
        title=f"(e) throughput at {LATENCY_MS:.0f} ms model latency, one "
        f"{'SQLite file' if where.is_sqlite else 'PostgreSQL database'}, "
        f"separate processes, {cycles} cycles each (median of {reps})",
    )
    most = counts[-1]
    eight = median([b.steady for b in results[most]])
    report(
        [
            Figure(
                "e",
                f"throughput {most} runs vs 1 run",
                eight / one,
                "x",
                0.75 * most,  # 8 runs >= 6x (and 4 runs >= 3x in the quick version)
                higher_is_better=True,
                note=f"{one:.2f} -> {eight:.2f} steps/s",
            ),
            Figure("e-1", "throughput, 1 run", one, "steps/s"),
            Figure(f"e-{most}", f"throughput, {most} runs", eight, "steps/s"),
        ],
        args.json,
    )


if __name__ == "__main__":
    main()
