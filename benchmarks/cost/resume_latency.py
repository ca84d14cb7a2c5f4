"""(d) Resume latency of a run at cycle 200: from `resume_run` to the first model request.

What it measures: how long a researcher waits, after a crash at cycle 200, between
resuming the run and the model being asked again. The figure with the target (<= 0.5 s)
is the in-process time from calling ``contreact.engine.runner.resume_run`` until the first
``/api/chat`` request reaches the stub, in a fresh process whose modules are already
imported (so it covers opening the database, the registry, rebuilding the JSONL log,
opening the checkpointer, compiling the graph, loading the checkpoint, assembling the
prompt and connecting to the model). The whole ``contreact resume`` CLI process is
reported separately: time to its first model request and total wall time, both of which
include the interpreter starting and importing LangChain/LangGraph.

How: the stub runs in this process with an agent wrapper that stamps
``time.monotonic()`` on every request (CLOCK_MONOTONIC is system-wide, so the stamp
compares with times read in child processes). A 200-cycle run of the constant-work
script (``common.CONSTANT_CYCLE``) is made with ``contreact run`` (a child process,
SQLite in a temp dir or PostgreSQL with ``--db-url``) and killed with SIGKILL the moment
the stub receives the second model request of cycle 200 - a real crash with a model
call in flight. Then, alternately:

* in-process: a child Python process imports the runner, notes ``t0`` and calls
  ``resume_run``; latency = first stamp after ``t0`` - ``t0``. It finishes the cycle,
  then calls ``resume_run(..., extra_cycles=1)`` again in the same process: the warm
  latency (everything already open) is printed for comparison;
* CLI: ``contreact resume RUN`` after another crash (each crash is made by extending
  the run with ``resume --cycles 1`` and killing it at step 1 of the new cycle).

Repeated (3 times; the run grows to cycle ~206) and the medians reported.
``--profile`` prints where the in-process resume spends its time until its first model
request, phase by phase (engine functions wrapped with timers, see ``timers.py``).
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

# The shared helpers (common.py, ...) are in benchmarks/, the folder above this one.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import (
    PYTHON,
    BenchStorage,
    Figure,
    Stamp,
    StampedStub,
    bench_storage,
    child_env,
    constant_work_agent,
    contreact_cmd,
    median,
    parser,
    print_table,
    report,
    run_config,
    write_yaml,
)


class Crasher:
    """Kills a child process when the stub sees a given (cycle, step) request."""

    def __init__(self) -> None:
        self.victim: subprocess.Popen[bytes] | None = None
        self.at: tuple[int, int] | None = None
        self.killed = threading.Event()

    def arm(self, victim: subprocess.Popen[bytes], cycle: int, step: int) -> None:
        """Kill ``victim`` at request (cycle, step)."""
        self.killed.clear()
        self.victim, self.at = victim, (cycle, step)

    def __call__(self, stamp: Stamp) -> None:
        """The stub's hook: kill before answering, so the answer is never received."""
        if self.victim is not None and self.at == (stamp.cycle, stamp.step):
            self.victim.send_signal(signal.SIGKILL)
            self.victim.wait()
            self.victim, self.at = None, None
            self.killed.set()


def crash(cmd: list[str], crasher: Crasher, cycle: int) -> None:
    """Run ``cmd`` (a contreact run/resume) and SIGKILL it at step 1 of ``cycle``."""
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=child_env(), cwd=Path.cwd()
    )
    crasher.arm(proc, cycle, 1)
    proc.wait()
    if not crasher.killed.wait(timeout=10 if proc.returncode == -signal.SIGKILL else 0):
        err = proc.stderr.read().decode() if proc.stderr else ""
        raise RuntimeError(f"the run ended (rc {proc.returncode}) before cycle {cycle}: {err}")


def wait_undriven(where: BenchStorage, run_id: str, timeout_s: float = 30.0) -> None:
    """Wait until the registry no longer counts the killed run as driven.

    A run's driver beats while it drives; after a kill -9 the run counts as driven until
    its heartbeat is stale, and `resume` refuses until then. That wait is the registry's
    liveness rule, not resume latency, so it stays outside the measured interval.
    """
    from contreact.checkpoints.engines import engine_for
    from contreact.checkpoints.registry import get_run

    engine = engine_for(where.storage())
    deadline = time.monotonic() + timeout_s
    while getattr(get_run(engine, run_id), "driven", False):
        if time.monotonic() > deadline:
            raise RuntimeError(f"run {run_id} still counts as driven after {timeout_s} s")
        time.sleep(0.05)


def resume_in_child(
    where: BenchStorage, run_id: str, stub: StampedStub, profile: bool
) -> tuple[float, float]:
    """Resume in a fresh child process; returns (cold latency, warm latency) in seconds."""
    wait_undriven(where, run_id)
    cmd = [PYTHON, __file__, "--child", run_id, "--data-dir", str(where.data_dir)]
    if where.db_url:
        cmd += ["--child-db-url", where.db_url]
    if profile:
        cmd.append("--profile")
    done = subprocess.run(cmd, capture_output=True, text=True, env=child_env(), check=False)
    if done.returncode != 0:
        raise RuntimeError(f"child failed: {done.stderr}")
    marks = {}
    for line in done.stdout.splitlines():
        if line.startswith("MARK "):
            _, name, value = line.split()
            marks[name] = float(value)
        elif profile:
            print(line)
    return first_after(stub, marks["cold"]), first_after(stub, marks["warm"])


def first_after(stub: StampedStub, t0: float) -> float:
    """Seconds from ``t0`` to the first request the stub stamped after it."""
    stamps = stub.agent.since(t0)
    if not stamps:
        raise RuntimeError("no model request after the resume started")
    return stamps[0].at - t0


def resume_cli(where: BenchStorage, run_id: str, stub: StampedStub) -> tuple[float, float]:
    """``contreact resume RUN``: (time to the first model request, whole process time)."""
    wait_undriven(where, run_id)
    t0 = time.monotonic()
    done = subprocess.run(
        contreact_cmd(where, "resume", run_id, "--quiet"),
        capture_output=True,
        text=True,
        env=child_env(),
        check=False,
    )
    wall = time.monotonic() - t0
    if done.returncode != 0:
        raise RuntimeError(f"contreact resume failed: {done.stderr}")
    return first_after(stub, t0), wall


def child(argv: list[str]) -> None:
    """The in-process measurement, run in a fresh interpreter (``--child RUN``)."""
    p = argparse.ArgumentParser()
    p.add_argument("--child")
    p.add_argument("--data-dir")
    p.add_argument("--child-db-url")
    p.add_argument("--profile", action="store_true")
    args = p.parse_args(argv)
    from contreact.checkpoints.storage import resolve_storage
    from contreact.engine.runner import resume_run

    storage = resolve_storage(args.data_dir, args.child_db_url)
    timers = None
    if args.profile:
        import httpx
        from timers import RESUME_TARGETS, Timers

        timers = Timers(RESUME_TARGETS).__enter__()
        original = httpx.Client.send
        first: dict[str, Any] = {}

        def send(self: Any, *a: Any, **k: Any) -> Any:
            request = k.get("request", a[0] if a else None)
            if not first and "/api/chat" in str(getattr(request, "url", "")):
                first["at"] = time.monotonic()
                first["seconds"] = dict(timers.seconds) if timers else {}
                first["calls"] = dict(timers.calls) if timers else {}
            return original(self, *a, **k)

        httpx.Client.send = send  # type: ignore[method-assign]
    t0 = time.monotonic()
    print(f"MARK cold {t0}", flush=True)
    outcome = resume_run(args.child, storage)
    if timers is not None:
        timers.__exit__()
        total = (first["at"] - t0) * 1000
        timers.seconds.clear()
        timers.seconds.update(first["seconds"])
        timers.calls.clear()
        timers.calls.update(first["calls"])
        rows = [r[:3] for r in timers.rows(1, total)]
        rows.append(
            [
                "rest (imports on first use, LangGraph, nodes, runner)",
                "",
                total - timers.top_level_ms(1),
            ]
        )
        rows.append(["resume_run -> first model request (this process's clock)", "", total])
        print_table(
            ["phase (inclusive wall time)", "calls", "ms"], rows, title="Resume, phase by phase"
        )
    if outcome.status != "completed":
        raise SystemExit(f"resume ended {outcome.status}: {outcome.reason}")
    print(f"MARK warm {time.monotonic()}", flush=True)
    outcome = resume_run(args.child, storage, extra_cycles=1)
    if outcome.status != "completed":
        raise SystemExit(f"warm resume ended {outcome.status}: {outcome.reason}")


def main() -> None:
    if "--child" in sys.argv:
        child(sys.argv[1:])
        return
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--profile", action="store_true", help="profile the in-process resume")
    args = p.parse_args()
    cycles, reps = (20, 1) if args.quick else (200, 3)
    crasher = Crasher()
    cold: list[float] = []
    warm: list[float] = []
    cli_first: list[float] = []
    cli_wall: list[float] = []
    with (
        bench_storage(args.db_url) as where,
        StampedStub(constant_work_agent(100_000), hook=crasher) as stub,
    ):
        run_id = f"resume-{uuid.uuid4().hex[:6]}"
        config = write_yaml(
            where.data_dir.parent / "run.yaml", run_config(run_id, stub.url, cycles, where)
        )
        started = time.monotonic()
        crash(contreact_cmd(where, "run", str(config), "--quiet"), crasher, cycles)
        print(f"built a {cycles}-cycle run and crashed it in {time.monotonic() - started:.1f} s")
        extend = contreact_cmd(where, "resume", run_id, "--cycles", "1", "--quiet")
        cycle = cycles
        for rep in range(reps):
            if rep:
                cycle += 1
                crash(extend, crasher, cycle)
            c, w = resume_in_child(where, run_id, stub, args.profile and rep == 0)
            cold.append(c)
            warm.append(w)
            cycle += 2  # the child finished the crashed cycle and added one more
            crash(extend, crasher, cycle)
            first, wall = resume_cli(where, run_id, stub)
            cli_first.append(first)
            cli_wall.append(wall)
        total_stamps = len(stub.agent.stamps)
    rows: list[tuple[str, float, list[float]]] = [
        ("in-process resume_run (fresh process, modules imported)", median(cold), cold),
        ("in-process resume_run, warm (same process, second resume)", median(warm), warm),
        ("CLI `contreact resume`: spawn -> first model request", median(cli_first), cli_first),
        ("CLI `contreact resume`: whole process wall time", median(cli_wall), cli_wall),
    ]
    print_table(
        ["measure", "median s", "samples s"],
        [[name, m, " ".join(f"{v:.3f}" for v in samples)] for name, m, samples in rows],
        title=f"(d) resume after a crash at cycle {cycles}+ ({total_stamps} model requests in all)",
    )
    report(
        [
            Figure(
                "d", f"resume_run -> first model request @cycle {cycles}", median(cold), "s", 0.5
            ),
            Figure("d-warm", "same, warm process", median(warm), "s"),
            Figure("d-cli", "CLI resume: spawn -> first model request", median(cli_first), "s"),
            Figure(
                "d-cli-wall",
                "CLI resume: whole process (finishes the cycle)",
                median(cli_wall),
                "s",
            ),
        ],
        args.json,
    )


if __name__ == "__main__":
    main()
