"""(f) Peak resident memory (RSS) of a 20-cycle run.

What it measures: the peak RSS of one ``contreact run`` process over a 20-cycle run of
the stub's simulated explorer (all six tools, an operator message answered by the
``auto`` policy, the similarity monitor), against the target of 250 MB. For scale it
also reports the peak RSS of an interpreter that only imports the CLI (what LangChain,
LangGraph, SQLAlchemy and friends cost before any work), and the RSS trajectory during
the run (a leak would show as RSS still climbing in the last cycles).

How: the run is a child process (``contreact run CONFIG``, SQLite in a temp dir or
PostgreSQL with ``--db-url``) against an in-process stub at 0 ms latency. Its peak RSS
is the ``ru_maxrss`` of ``os.wait4()`` for exactly that child (the kernel's high-water
mark, KiB on Linux); while it runs, ``/proc/<pid>/status`` ``VmRSS`` is sampled every
20 ms for the trajectory.
"""

from __future__ import annotations

import os
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
    Figure,
    StampedStub,
    bench_storage,
    child_env,
    contreact_cmd,
    parser,
    peak_rss_mb,
    print_table,
    report,
    run_config,
    write_yaml,
)

from contreact.stub import SimulatedAgent


def vm_rss_mb(pid: int) -> float | None:
    """Current VmRSS of a process in MB, or None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024 / 1e6
    return None


def run_child(cmd: list[str]) -> tuple[float, list[tuple[float, float]], int, str]:
    """Run ``cmd``; returns (peak RSS MB, [(monotonic time, RSS MB)], exit code, stderr)."""
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=child_env()
    )
    samples: list[tuple[float, float]] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            rss = vm_rss_mb(proc.pid)
            if rss is not None:
                samples.append((time.monotonic(), rss))
            time.sleep(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    stop.set()
    sampler.join()
    return peak_rss_mb(usage), samples, proc.returncode, err


def main() -> None:
    args = parser(__doc__.splitlines()[0]).parse_args()
    cycles = 5 if args.quick else 20
    imports_peak, _, rc, err = run_child(
        [PYTHON, "-c", "import contreact.cli, contreact.engine.runner"]
    )
    if rc != 0:
        raise RuntimeError(f"import-only child failed: {err}")
    with bench_storage(args.db_url) as where, StampedStub(SimulatedAgent(seed=3)) as stub:
        run_id = f"rss-{uuid.uuid4().hex[:6]}"
        config = write_yaml(
            where.data_dir.parent / "run.yaml", run_config(run_id, stub.url, cycles, where)
        )
        started = time.monotonic()
        peak, samples, rc, err = run_child(contreact_cmd(where, "run", str(config), "--quiet"))
        duration = time.monotonic() - started
        calls = [s.at for s in stub.agent.stamps]
    if rc != 0:
        raise RuntimeError(f"contreact run failed (rc {rc}): {err}")
    steps = len(calls)
    trajectory: list[Any] = []
    for at in (calls[0], calls[steps // 4], calls[steps // 2], calls[3 * steps // 4], calls[-1]):
        upto = [rss for t, rss in samples if t <= at]
        trajectory.append(upto[-1] if upto else 0.0)
    print_table(
        ["process", "peak RSS MB", "RSS at model call 1 / 25% / 50% / 75% / last, MB"],
        [
            ["python -c 'import contreact.cli, contreact.engine.runner'", imports_peak, "-"],
            [
                f"contreact run, {cycles} cycles ({steps} model calls, {duration:.1f} s)",
                peak,
                " / ".join(f"{v:.0f}" for v in trajectory),
            ],
        ],
        title="(f) peak resident memory (ru_maxrss of the child, via os.wait4)",
    )
    report(
        [
            Figure("f", f"peak RSS of a {cycles}-cycle run", peak, "MB", 250.0),
            Figure("f-imports", "peak RSS after imports only", imports_peak, "MB"),
        ],
        args.json,
    )


if __name__ == "__main__":
    main()
