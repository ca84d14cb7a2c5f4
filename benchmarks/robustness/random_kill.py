"""Random-time kill -9: 1-8 kills a run, resumed each time, against an uninterrupted run.

The failpoint test (`tests/e2e/test_crash_resume.py`) kills in the windows that matter; this
kills wherever the clock says. Each trial starts `contreact run` and, 1 to 8 times, sends
SIGKILL at a random moment: mostly uniform over a window after the process's first
model request (1.5 x the uninterrupted run's working time / the kills planned, so most
planned kills land), 15 % of kills uniform over its start-up (a kill
that comes after the process ended is not counted). Then `contreact resume` at once (or
`run` again when the kill came before the run was registered); a last resume finishes
the run. The trial passes when
its reflections, memory and event log (wall-clock fields aside) equal the uninterrupted
run's, and the model requests the stub received are the uninterrupted run's plus at
most one repeat per kill (only a call in flight at a kill is asked again).

    python benchmarks/robustness/random_kill.py --trials 30
    python benchmarks/robustness/random_kill.py --trials 10 --db-url postgresql://postgres@127.0.0.1:5432/test
"""

from __future__ import annotations

import random
import subprocess
import sys
import threading
import time
from pathlib import Path

# The shared helpers (common.py, ...) are in benchmarks/, the folder above this one.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import (
    BenchStorage,
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
from outcomes import bodies, outcome

from contreact.stub import StubServer

CYCLES = 3
LATENCY_MS = 40.0


def _start(where: BenchStorage, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        contreact_cmd(where, *args),
        env=child_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )


def _first_request(server: StubServer, into: list[float]) -> None:
    while not server.requests():
        time.sleep(0.002)
    into.append(time.monotonic())


def _exists(where: BenchStorage, run_id: str) -> bool:
    from contreact.checkpoints.engines import engine_for
    from contreact.checkpoints.registry import RunNotFoundError, get_run

    try:
        get_run(engine_for(where.storage()), run_id)
    except RunNotFoundError:
        return False
    return True


def trial(
    where: BenchStorage,
    server: StubServer,
    run_id: str,
    startup_s: float,
    work_s: float,
    rng: random.Random,
) -> tuple[int, int, int, list[str]]:
    """One killed-and-resumed run: (kills planned, kills landed, repeated requests, errors)."""
    config = write_yaml(
        where.data_dir.parent / f"{run_id}.yaml",
        run_config(run_id, server.url, CYCLES, where),
    )
    planned = rng.randint(1, 8)
    landed = 0
    errors: list[str] = []
    server.reset()
    proc = _start(where, "run", str(config))
    for _ in range(planned):
        # Mostly while the run works (after its first model request of this process),
        # sometimes while the process is still starting.
        seen = len(server.requests())
        if rng.random() < 0.15:
            deadline = time.monotonic() + rng.uniform(0.05, startup_s)
        else:
            while proc.poll() is None and len(server.requests()) == seen:
                time.sleep(0.005)
            # Within a window that shrinks with the kills planned, so most of them land
            # before the run is done.
            deadline = time.monotonic() + rng.uniform(0.0, max(0.3, 1.5 * work_s / planned))
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        if proc.poll() is not None:
            break
        proc.kill()
        proc.wait()
        landed += 1
        # Killed before it was registered, a run is started again, as a person would.
        proc = _start(
            where, *(("resume", run_id) if _exists(where, run_id) else ("run", str(config)))
        )
    _, err = proc.communicate(timeout=300)
    if proc.returncode == 2 and b"already completed" in err:
        pass  # killed after the run completed, before the process exited
    elif proc.returncode != 0:
        errors.append(f"last resume exit {proc.returncode}: {err.decode()[-300:]}")
    return planned, landed, sum(bodies(server.requests()).values()), errors


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--trials", type=int, default=30)
    p.add_argument("--seed", type=int, default=16)
    args = p.parse_args()
    trials = 3 if args.quick else args.trials
    rng = random.Random(args.seed)
    rows, figures = [], []
    with (
        bench_storage(args.db_url, "contreact-kill-") as where,
        StubServer(latency_ms=LATENCY_MS).start() as server,
    ):
        ref_config = write_yaml(
            where.data_dir.parent / "ref.yaml", run_config("ref", server.url, CYCLES, where)
        )
        started = time.monotonic()
        first: list[float] = []
        watcher = threading.Thread(target=_first_request, args=(server, first), daemon=True)
        watcher.start()
        subprocess.run(
            contreact_cmd(where, "run", str(ref_config)),
            env=child_env(),
            check=True,
            capture_output=True,
        )
        span_s = time.monotonic() - started
        watcher.join()
        startup_s = first[0] - started
        work_s = span_s - startup_s
        expected, expected_requests = outcome(where, "ref"), bodies(server.requests())
        identical = within = 0
        for n in range(1, trials + 1):
            run_id = f"kill-{n}"
            planned, landed, _, errors = trial(where, server, run_id, startup_s, work_s, rng)
            sent = bodies(server.requests())
            extra = sent - expected_requests
            missing = expected_requests - sent
            try:
                same = outcome(where, run_id) == expected and not errors
            except OSError as exc:
                same, errors = False, [*errors, str(exc)]
            ok_requests = not missing and sum(extra.values()) <= landed
            identical += same
            within += ok_requests
            rows.append(
                [
                    run_id,
                    planned,
                    landed,
                    sum(extra.values()),
                    same,
                    ok_requests,
                    "; ".join(errors)[:80],
                ]
            )
            print(
                f"{run_id}: kills {landed}/{planned}, repeated requests "
                f"{sum(extra.values())}, identical {same}, requests ok {ok_requests}",
                flush=True,
            )
    backend = "PostgreSQL" if args.db_url else "SQLite"
    print_table(
        [
            "trial",
            "kills planned",
            "kills landed",
            "repeated requests",
            "identical",
            "requests ok",
            "errors",
        ],
        rows,
        title=f"Random kill -9 on {backend} "
        f"({CYCLES} cycles, stub latency {LATENCY_MS:g} ms, uninterrupted run "
        f"{span_s:.1f} s)",
    )
    total_kills = sum(r[2] for r in rows)
    figures = [
        Figure(
            "k1",
            f"trials identical to the uninterrupted run ({backend})",
            100.0 * identical / trials,
            "%",
            100.0,
            True,
            f"{identical}/{trials} trials",
        ),
        Figure(
            "k2",
            "trials whose only repeated requests were in flight at a kill",
            100.0 * within / trials,
            "%",
            100.0,
            True,
            f"{within}/{trials} trials",
        ),
        Figure(
            "k3",
            "kills landed",
            float(total_kills),
            "",
            None,
            True,
            f"{trials} trials, 1-8 planned each",
        ),
        Figure(
            "k4",
            "model requests repeated",
            float(sum(r[3] for r in rows)),
            "",
            None,
            False,
            f"over {total_kills} kills",
        ),
    ]
    report(figures, args.json)


if __name__ == "__main__":
    main()
