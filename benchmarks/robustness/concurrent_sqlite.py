"""16 runs at once on one SQLite file, the model answering at once (0 ms latency).

The worst case for SQLite's single writer: every run writes checkpoints, journal rows,
events and heartbeats as fast as it can, nothing (no model latency) spreading the
writes out. All runs start together as separate `contreact run` processes on one data
directory (one `contreact.db`, created by whichever process comes first) against one
stub. Reported: how many completed, how many printed a lock error ("locked" or "busy"
on stderr), and the wall time from the first start to the last exit; each run's
reflections are checked against a run made alone.

    python benchmarks/robustness/concurrent_sqlite.py            # 16 runs x 3 cycles
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

# The shared helpers (common.py, ...) are in benchmarks/, the folder above this one.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import (
    Figure,
    bench_storage,
    child_env,
    contreact_cmd,
    parser,
    print_table,
    report,
    run_config,
    write_yaml,
)
from outcomes import outcome

from contreact.stub import StubServer

CYCLES = 3


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=16)
    args = p.parse_args()
    runs = 4 if args.quick else args.runs
    with (
        bench_storage(None, "contreact-conc-") as where,
        StubServer(latency_ms=0).start() as server,
    ):
        alone = bench_storage(None, "contreact-alone-")
        with alone as solo:
            cfg = write_yaml(
                solo.data_dir.parent / "a.yaml", run_config("r01", server.url, CYCLES, solo)
            )
            subprocess.run(
                contreact_cmd(solo, "run", str(cfg)),
                env=child_env(),
                check=True,
                capture_output=True,
            )
            expected = outcome(solo, "r01")[0]
        configs = [
            write_yaml(
                where.data_dir.parent / f"r{i:02d}.yaml",
                run_config(f"r{i:02d}", server.url, CYCLES, where),
            )
            for i in range(1, runs + 1)
        ]
        started = time.monotonic()
        procs = [
            subprocess.Popen(
                contreact_cmd(where, "run", str(c)),
                env=child_env(),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                stdin=subprocess.DEVNULL,
            )
            for c in configs
        ]
        results = [(p.wait(), p.stderr.read().decode() if p.stderr else "") for p in procs]
        wall = time.monotonic() - started
        rows = []
        completed = locks = same = 0
        for i, (code, err) in enumerate(results, start=1):
            locked = "locked" in err.lower() or "busy" in err.lower()
            ok = code == 0
            identical = ok and outcome(where, f"r{i:02d}")[0] == expected
            completed += ok
            locks += locked
            same += identical
            rows.append([f"r{i:02d}", code, locked, identical, err.strip()[:70]])
        print_table(
            ["run", "exit", "lock error", "same reflections as alone", "stderr"],
            rows,
            title=f"{runs} concurrent runs x {CYCLES} cycles on one SQLite file, stub latency 0 ms",
        )
        requests = len(server.requests())
    report(
        [
            Figure("c1", f"runs completed of {runs}", float(completed), "", float(runs), True),
            Figure("c2", "runs that printed a lock error", float(locks), "", 0.0, False),
            Figure(
                "c3",
                "runs with the reflections of a run made alone",
                float(same),
                "",
                float(runs),
                True,
            ),
            Figure(
                "c4",
                "wall time, first start to last exit",
                wall,
                "s",
                None,
                False,
                f"{requests} model requests in all; 2 shared cores",
            ),
        ],
        args.json,
    )


if __name__ == "__main__":
    main()
