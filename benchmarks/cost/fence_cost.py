"""What the fence costs a run that holds no lease, per model call.

On a database with the study queue's triggers and without them. A database a study's
queue has used carries the fence (`checkpoints.fencing`): a trigger on every table a run
writes. A run that holds no lease (the CLI's, Studio's) passes it with
one setting read per row written. This measures that: the constant-work run (three model
calls a cycle, 0 ms model latency, the stub in a child process) on two throwaway PostgreSQL
databases, one with the fence installed, alternating, wall and CPU per model call in
steady state (the minimum over repetitions, and the median).
Run: `.venv/bin/python benchmarks/cost/fence_cost.py [--db-url URL] [--quick]`.
"""

from __future__ import annotations

import sys
from pathlib import Path

# The shared helpers (common.py, ...) are in benchmarks/, the folder above this one.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import (
    Figure,
    StubProcess,
    bench_storage,
    constant_work_scenario,
    median,
    parser,
    print_table,
    report,
)
from overhead import contreact_loop, steady_step_s

from contreact.checkpoints.engines import engine_for
from contreact.checkpoints.fencing import install_fences
from contreact.checkpoints.saver import open_saver

DEFAULT_PG = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


def main() -> None:
    args = parser(__doc__.splitlines()[0]).parse_args()
    cycles, reps = (4, 2) if args.quick else (12, 7)
    url = args.db_url or DEFAULT_PG
    walls: dict[str, list[float]] = {"without the fence": [], "with the fence": []}
    cpus: dict[str, list[float]] = {k: [] for k in walls}
    with bench_storage(url) as plain, bench_storage(url) as fenced:
        with open_saver(fenced.storage()):
            pass
        install_fences(engine_for(fenced.storage()))
        with StubProcess(constant_work_scenario(1000), plain.data_dir.parent) as stub:
            order = [("without the fence", plain), ("with the fence", fenced)]
            for rep in range(reps + 1):  # the first round warms up
                for label, where in order if rep % 2 == 0 else order[::-1]:
                    stub.reset()
                    ends = contreact_loop(stub.url, cycles, where)
                    n = len(stub.requests())
                    steps = n - n // cycles
                    if rep:
                        walls[label].append(steady_step_s(ends, steps))
                        cpus[label].append(steady_step_s(ends, steps, cpu=True))
    print_table(
        ["database", "wall ms/call", "CPU ms/call", "wall median", "CPU median"],
        [
            [
                k,
                min(walls[k]) * 1000,
                min(cpus[k]) * 1000,
                median(walls[k]) * 1000,
                median(cpus[k]) * 1000,
            ]
            for k in walls
        ],
        title=f"per model call, 0 ms latency ({reps} alternating runs x {cycles} cycles)",
    )
    ratio = min(walls["with the fence"]) / min(walls["without the fence"])
    report(
        [Figure("F1", "wall per call, fenced tables vs none (no lease held)", ratio, "x")],
        args.json,
    )


if __name__ == "__main__":
    main()
