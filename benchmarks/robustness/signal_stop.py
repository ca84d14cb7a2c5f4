"""SIGTERM and SIGINT mid-run: how fast the process stops, the status left, the resume.

Each trial starts `contreact run` against a stub answering in 200 ms, waits until the
run is mid-cycle (a random 1-6 model requests after its first, so the signal lands in a
model call, a tool or between steps), sends the signal and times the exit. Then
`contreact status` must say `interrupted` and `contreact resume` must end the run
identical (reflections, memory, events) to an uninterrupted one.

    python benchmarks/robustness/signal_stop.py --trials 5
"""

from __future__ import annotations

import json
import random
import signal
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
    median,
    parser,
    print_table,
    report,
    run_config,
    write_yaml,
)
from outcomes import outcome

from contreact.stub import StubServer

CYCLES = 2
LATENCY_MS = 200.0


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--trials", type=int, default=5)
    p.add_argument("--seed", type=int, default=15)
    args = p.parse_args()
    trials = 1 if args.quick else args.trials
    rng = random.Random(args.seed)
    rows, figures = [], []
    with (
        bench_storage(args.db_url, "contreact-sig-") as where,
        StubServer(latency_ms=LATENCY_MS).start() as server,
    ):
        ref = write_yaml(
            where.data_dir.parent / "ref.yaml", run_config("ref", server.url, CYCLES, where)
        )
        subprocess.run(
            contreact_cmd(where, "run", str(ref)), env=child_env(), check=True, capture_output=True
        )
        expected = outcome(where, "ref")
        for signum in (signal.SIGTERM, signal.SIGINT):
            times = []
            for n in range(1, trials + 1):
                run_id = f"{signum.name.lower()}-{n}"
                cfg = write_yaml(
                    where.data_dir.parent / f"{run_id}.yaml",
                    run_config(run_id, server.url, CYCLES, where),
                )
                seen = len(server.requests())
                proc = subprocess.Popen(
                    contreact_cmd(where, "run", str(cfg)),
                    env=child_env(),
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                    stdin=subprocess.DEVNULL,
                )
                wait_for = rng.randint(1, 6)
                while len(server.requests()) < seen + wait_for and proc.poll() is None:
                    time.sleep(0.005)
                time.sleep(rng.uniform(0.0, LATENCY_MS / 1000))
                sent = time.monotonic()
                proc.send_signal(signum)
                _, err = proc.communicate(timeout=60)
                stop_s = time.monotonic() - sent
                status = json.loads(
                    subprocess.run(
                        contreact_cmd(where, "status", run_id, "--json"),
                        env=child_env(),
                        capture_output=True,
                        text=True,
                    ).stdout
                )["status"]
                resumed = subprocess.run(
                    contreact_cmd(where, "resume", run_id),
                    env=child_env(),
                    capture_output=True,
                    text=True,
                )
                same = resumed.returncode == 0 and outcome(where, run_id) == expected
                times.append(stop_s)
                rows.append(
                    [run_id, proc.returncode, stop_s, status, same, "Traceback" in err.decode()]
                )
            figures.append(
                Figure(
                    f"s-{signum.name}",
                    f"{signum.name} stop time (median)",
                    median(times),
                    "s",
                    2.0,
                    False,
                    f"max {max(times):.2f} s over {trials} trials",
                )
            )
    print_table(
        ["trial", "exit", "stop s", "status", "resume identical", "traceback"],
        rows,
        title=f"Signals mid-run ({CYCLES} cycles, stub latency {LATENCY_MS:g} ms)",
    )
    figures.append(
        Figure(
            "s-ok",
            "trials interrupted, resumed identical, no traceback",
            float(sum(1 for r in rows if r[3] == "interrupted" and r[4] and not r[5])),
            "",
            float(len(rows)),
            True,
        )
    )
    report(figures, args.json)


if __name__ == "__main__":
    main()
