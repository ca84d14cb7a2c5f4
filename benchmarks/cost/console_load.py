"""What the lab console (`contreact ui`) costs: page loads, live updates, and the runs' overhead.

The study: 100 runs x 100 cycles (``--quick``: 10 x 20) in one storage, five models of 20
runs in one batch. One run is driven by the real engine against the in-process stub (the
steady workload: write, read, list, reflect), and its rows (registry, cycles, events,
memory, similarity keys) are copied under 99 more run ids: driving 10,000 cycles would take
most of an hour on two cores and show the console nothing more.

Measured against a real ``contreact ui`` process over that storage:

* the overview's and a 100-cycle run page's load time (the whole HTML, over HTTP; median
  of 5 after one warm-up);
* how long after an event commits the open overview receives the changed row: a run of
  12 cycles is driven here at 100 ms per model call while the overview's event stream is
  read; per cycle, the first pushed row that shows it finished, minus its CYCLE_END's
  commit time;
* the runs' per-call overhead with five consoles open: the step time of a run of 60 cycles
  in this process (``benchmarks/overhead.py``'s loop: constant-work script, zero-latency stub
  in a child process), in steady state (from the end of cycle 10: a run's start, when every
  console reads its row for the first time, is a one-off), with no console at all against
  five console processes each with an overview open (its event stream read by ``curl``),
  alternated, medians compared; beside it the run's own CPU per step, and the CPU the five
  consoles took, as a share of one core.

Run: `.venv/bin/python benchmarks/cost/console_load.py [--quick] [--json PATH] [--db-url URL]`.
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

import httpx

# The shared helpers (common.py, ...) are in benchmarks/, the folder above this one.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import (
    PYTHON,
    ROOT,
    BenchStorage,
    Figure,
    StubProcess,
    bench_storage,
    child_env,
    constant_work_scenario,
    median,
    parser,
    report,
    run_config,
    steady_agent,
)
from overhead import contreact_loop
from sqlalchemy import insert, select

from contreact.checkpoints.engines import engine_for
from contreact.checkpoints.schema import (
    batch_runs,
    cycles,
    events,
    memories,
    runs,
    similarity_keys,
)
from contreact.config import parse_config
from contreact.engine.runner import start_run
from contreact.stub import StubServer

MODELS = ("model-a", "model-b", "model-c", "model-d", "model-e")
CONSOLES = 5
STEPS_PER_CYCLE = 3
"""Model calls of the constant-work cycle (write, read, answer)."""
SETTLE_CYCLES = 10
"""Cycles left out of the steady state: a run's start (registering it, the consoles reading
its row for the first time) is a one-off, not what each call costs."""
ADDRESS = re.compile(r"contreact console at (http://\S+/) ")


def build_study(where: BenchStorage, n_runs: int, n_cycles: int) -> list[str]:
    """Drive one run of the study, copy its rows to the others; their run ids."""
    with StubServer(steady_agent()).start() as stub:
        first = "bench.model-a.r1"
        config = run_config(first, stub.url, n_cycles, where, batch="bench")
        outcome = start_run(parse_config(config, first), where.storage())
        assert outcome.status == "completed", outcome
    engine = engine_for(where.storage())
    ids = [f"bench.{MODELS[i % len(MODELS)]}.r{i // len(MODELS) + 1}" for i in range(n_runs)]
    with engine.begin() as conn:
        source = dict(conn.execute(select(runs).where(runs.c.run_id == first)).mappings().one())
        copied = {
            table: [
                {k: v for k, v in row.items() if k != "id"}
                for row in conn.execute(select(table).where(table.c.run_id == first)).mappings()
            ]
            for table in (cycles, events, memories, similarity_keys)
        }
        plan = [
            {
                "batch": "bench",
                "run_id": r,
                "position": i,
                "model": r.split(".")[1],
                "cycles": n_cycles,
            }
            for i, r in enumerate(ids)
        ]
        conn.execute(insert(batch_runs), plan)
        for run_id in ids[1:]:
            model = run_id.split(".")[1]
            conn.execute(
                insert(runs).values(
                    {**source, "run_id": run_id, "thread_id": str(uuid.uuid4()), "model": model}
                )
            )
            for table, rows in copied.items():
                if rows:
                    conn.execute(insert(table), [{**row, "run_id": run_id} for row in rows])
    return ids


PIDS: list[int] = []
"""The console processes running now (their CPU time is read while a run is measured)."""


def cpu_seconds(pids: list[int]) -> float:
    """User and system CPU seconds the processes `pids` have used so far (Linux)."""
    import os

    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


@contextmanager
def console(where: BenchStorage) -> Iterator[str]:
    """A `contreact ui` process over the study; its address."""
    cmd = [PYTHON, "-m", "contreact", *where.cli_args(), "ui", "--port", "0"]
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        env=child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    assert proc.stdout is not None
    found = ADDRESS.search(proc.stdout.readline())
    PIDS.append(proc.pid)
    try:
        if found is None:
            raise RuntimeError("the console did not start")
        yield found.group(1)
    finally:
        PIDS.remove(proc.pid)
        proc.terminate()
        proc.wait(timeout=30)


def load_times(url: str, reps: int) -> list[float]:
    """Seconds to fetch `url` whole, after a warm-up."""
    with httpx.Client(timeout=60) as client:
        client.get(url).raise_for_status()
        times = []
        for _ in range(reps):
            started = time.perf_counter()
            client.get(url).raise_for_status()
            times.append(time.perf_counter() - started)
    return times


def _epoch(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def event_latencies(where: BenchStorage, url: str, n_cycles: int) -> list[float]:
    """Per cycle of a run driven now: first pushed row showing it done, minus its commit."""
    run_id = f"live-{uuid.uuid4().hex[:6]}"
    pushed: list[tuple[float, str]] = []
    stop = threading.Event()

    def read() -> None:
        with (
            contextlib.suppress(httpx.HTTPError),
            httpx.stream("GET", url + "stream/overview", timeout=None) as stream,
        ):
            event = ""
            for line in stream.iter_lines():
                if stop.is_set():
                    return
                if line.startswith("event: "):
                    event = line[7:]
                elif line.startswith("data: ") and event == f"run-{run_id}":
                    pushed.append((time.time(), line))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    time.sleep(1.0)  # the stream is open and the console's watcher has looked once
    with StubServer(steady_agent(), latency_ms=100).start() as stub:
        config = run_config(run_id, stub.url, n_cycles, where)
        assert start_run(parse_config(config, run_id), where.storage()).status == "completed"
    time.sleep(2.0)
    stop.set()
    with engine_for(where.storage()).connect() as conn:
        ends = {
            int(c): _epoch(str(t))
            for c, t in conn.execute(
                select(events.c.cycle, events.c.timestamp).where(
                    events.c.run_id == run_id, events.c.event_type == "CYCLE_END"
                )
            )
        }
    done = [(at, _done_in(data)) for at, data in pushed]
    latencies = []
    for cycle, committed in sorted(ends.items()):
        shown = [at for at, count in done if count >= cycle]
        if shown:
            latencies.append(min(shown) - committed)
    return latencies


DONE = re.compile(r'data-testid="cycle">(\d+)/')


def _done_in(row: str) -> int:
    """The finished cycles a pushed overview row shows."""
    found = DONE.search(row)
    return int(found.group(1)) if found else -1


@contextmanager
def open_consoles(where: BenchStorage, count: int) -> Iterator[None]:
    """`count` consoles, each with its overview's event stream open (read by curl)."""
    with contextlib.ExitStack() as stack:
        for _ in range(count):
            url = stack.enter_context(console(where))
            reader = subprocess.Popen(
                ["curl", "-s", "-N", url + "stream/overview"], stdout=subprocess.DEVNULL
            )
            stack.callback(reader.wait)
            stack.callback(reader.terminate)
        time.sleep(1.5)  # every watcher primed
        yield


def overhead(where: BenchStorage, cycles: int, reps: int) -> dict[str, list[float]]:
    """Per-step seconds of a run with no console and with five open, alternated.

    Also the run's own CPU seconds per step, and the consoles' CPU seconds per second of
    the watched runs (the share of a core they took from the machine).
    """
    out: dict[str, list[float]] = {
        k: [] for k in ("alone", "watched", "alone_cpu", "watched_cpu", "console_share")
    }
    with StubProcess(constant_work_scenario(cycles), where.data_dir).start() as stub:
        contreact_loop(stub.url, 2, where)  # warm-up
        for rep in range(reps):
            order = [False, True] if rep % 2 == 0 else [True, False]
            for with_consoles in order:
                stub.reset()
                if with_consoles:
                    with open_consoles(where, CONSOLES):
                        used, started = cpu_seconds(PIDS), time.perf_counter()
                        ends = contreact_loop(stub.url, cycles, where)
                        share = (cpu_seconds(PIDS) - used) / (time.perf_counter() - started)
                        out["console_share"].append(share * 100)
                else:
                    ends = contreact_loop(stub.url, cycles, where)
                calls = len(stub.requests())
                if calls != STEPS_PER_CYCLE * cycles:
                    raise RuntimeError(f"{calls} model calls, not {STEPS_PER_CYCLE} a cycle")
                steps = STEPS_PER_CYCLE * (len(ends) - 1 - SETTLE_CYCLES)
                name = "watched" if with_consoles else "alone"
                after = ends[SETTLE_CYCLES]
                out[name].append((ends[-1][0] - after[0]) / steps)
                out[f"{name}_cpu"].append((ends[-1][1] - after[1]) / steps)
    return out


def main() -> None:
    args = parser(__doc__.splitlines()[0]).parse_args()
    n_runs, n_cycles = (10, 20) if args.quick else (100, 100)
    reps, overhead_cycles = (2, 20) if args.quick else (6, 60)
    with bench_storage(args.db_url) as where:
        started = time.perf_counter()
        ids = build_study(where, n_runs, n_cycles)
        built_s = time.perf_counter() - started
        with console(where) as url:
            overview_s = median(load_times(url, 5))
            run_s = median(load_times(f"{url}runs/{ids[-1]}", 5))
            latencies = event_latencies(where, url, 12)
        measured = overhead(where, overhead_cycles, reps)
    study = f"{n_runs} runs x {n_cycles} cycles"

    def change(key: str) -> float:
        alone, watched = median(measured[key]), median(measured[key.replace("alone", "watched")])
        return (watched - alone) / alone * 100

    print(f"\nStudy of {study} built in {built_s:.1f} s (one run driven, its rows copied).")
    print(f"Event latencies (s): {', '.join(f'{v:.2f}' for v in latencies)}")
    for key, values in measured.items():
        scale = 1 if key == "console_share" else 1000  # a share in %, times in ms
        print(f"{key}: {', '.join(f'{v * scale:.1f}' for v in values)}")
    figures = [
        Figure("overview", f"overview load, {study}", overview_s, "s", target=1.0),
        Figure("run", f"run page load, {n_cycles} cycles", run_s, "s", target=1.0),
        Figure("event", "event to open overview, median", median(latencies), "s", target=2.0),
        Figure("event-max", "event to open overview, slowest", max(latencies), "s", target=2.0),
        Figure(
            "overhead", f"step time, {CONSOLES} consoles open", change("alone"), "%", target=5.0
        ),
        Figure("overhead-cpu", "the run's CPU per step, consoles open", change("alone_cpu"), "%"),
        Figure(
            "console-cpu",
            f"{CONSOLES} open consoles' CPU",
            median(measured["console_share"]),
            "% of a core",
        ),
    ]
    report(figures, args.json)
    if args.json:
        extra = Path(args.json).with_suffix(".raw.json")
        extra.write_text(json.dumps({**measured, "latencies": latencies}))


if __name__ == "__main__":
    main()
