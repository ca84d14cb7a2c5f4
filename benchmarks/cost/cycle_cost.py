"""Driver time per cycle early and late in one long run of the steady workload.

What it measures: whether a cycle late in a run costs what an early one did (every
per-cycle cost must be O(1) in the cycle number). The workload is
``common.steady_scenario``: every cycle writes one of 8 memory slots, reads it back,
lists the keys and reflects (four model calls, three tool calls), so the agent's own
work is constant and whatever grows is the framework's.

How: one contreact run (in this process, ``start_run``) against the stub in a child
process at 0 ms latency, on a fresh SQLite file (or a throwaway PostgreSQL database with
``--db-url``). A runner ``Progress`` hook stamps ``time.perf_counter()`` when each cycle's
``reflect`` node reports; a cycle's time is the gap between two stamps (the stub answers
at once, so this is the driver's time). Printed: the median over the first and the last
10 % of cycles and their ratio (wall clock, and this process's CPU time, which other
work on a loaded machine inflates far less), and the database file's size per cycle.
Bytes per cycle early and late are ``storage_growth.py``'s and
``tests/unit/test_long_run_cost.py``'s.
"""

from __future__ import annotations

import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The shared helpers (common.py, ...) are in benchmarks/, the folder above this one.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import (
    Figure,
    StubProcess,
    bench_storage,
    median,
    now,
    parser,
    print_table,
    report,
    run_config,
    steady_scenario,
)

from contreact.engine.outcome import SilentProgress


@dataclass
class CycleStamps(SilentProgress):
    """A runner `Progress` that stamps the end of every cycle."""

    stamps: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)

    def started(self, record: Any, state: Any, resumed: bool) -> None:
        """Stamp 'cycle 0': the run is registered and about to start cycle 1."""
        self.stamps.append(now())
        self.cpu.append(time.process_time())

    def update(self, node: str, update: dict[str, Any]) -> None:
        """Stamp when a cycle ends."""
        if node == "reflect":
            self.stamps.append(now())
            self.cpu.append(time.process_time())


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--cycles", type=int, default=1000, help="length of the run (default 1000)")
    args = p.parse_args()
    cycles = 100 if args.quick else args.cycles
    tenth = max(1, cycles // 10)
    with bench_storage(args.db_url) as where:
        workdir = where.data_dir.parent
        run_id = f"cost-{uuid.uuid4().hex[:6]}"
        with StubProcess(steady_scenario(cycles), workdir) as stub:
            from contreact.config import parse_config
            from contreact.engine.runner import start_run

            progress = CycleStamps()
            config = parse_config(run_config(run_id, stub.url, cycles, where), "benchmark")
            started = now()
            outcome = start_run(config, where.storage(), progress=progress)
            elapsed = now() - started
        if outcome.status != "completed":
            raise RuntimeError(f"run ended {outcome.status}: {outcome.reason}")
        size = where.sqlite_path.stat().st_size if where.is_sqlite else None
    ms = [(b - a) * 1000 for a, b in zip(progress.stamps, progress.stamps[1:], strict=False)]
    cpu = [(b - a) * 1000 for a, b in zip(progress.cpu, progress.cpu[1:], strict=False)]
    first, last = median(ms[:tenth]), median(ms[-tenth:])
    cpu_first, cpu_last = median(cpu[:tenth]), median(cpu[-tenth:])
    backend = "SQLite" if where.is_sqlite else "PostgreSQL"
    print(f"{cycles} cycles in {elapsed:.1f} s on {backend}")
    rows = [
        [f"cycles 1-{tenth}", first, cpu_first],
        *(
            # Once the windows are full (the prompt's notes, the monitor's 100 newest).
            [
                [
                    f"cycles 201-{200 + tenth}",
                    median(ms[200 : 200 + tenth]),
                    median(cpu[200 : 200 + tenth]),
                ]
            ]
            if cycles >= 1000
            else []
        ),
        [f"cycles {cycles - tenth + 1}-{cycles}", last, cpu_last],
        ["ratio", f"{last / first:.2f}x", f"{cpu_last / cpu_first:.2f}x"],
    ]
    print_table(
        ["window", "median wall ms/cycle", "median CPU ms/cycle"],
        rows,
        title="Driver time per cycle (CPU: this process only, robust on a loaded machine)",
    )
    if size is not None:
        print(f"database file: {size / 1e6:.2f} MB ({size / cycles / 1024:.1f} KiB/cycle)")
    report(
        [
            Figure(
                "cost",
                f"ms/cycle, last vs first 10 % of {cycles} cycles",
                last / first,
                "x",
                1.1,
                note=f"{first:.1f} -> {last:.1f} ms",
            ),
            Figure(
                "cost-cpu",
                f"driver CPU ms/cycle, last vs first 10 % of {cycles} cycles",
                cpu_last / cpu_first,
                "x",
                1.1,
                note=f"{cpu_first:.1f} -> {cpu_last:.1f} ms",
            ),
        ],
        args.json,
    )


if __name__ == "__main__":
    main()
