"""(W) A study on the queue: three workers vs one, and three workers killed three times.

What it measures: a study of 4 models x 3 replicates x 5 cycles on
two stub Ollama hosts that answer after 200 ms, stored in one PostgreSQL database, driven
by `contreact worker` processes that stand in for machines (each its own working directory
and `CONTREACT_HOME`; each `--parallel 1` by default):

* **one worker**: wall time from its start to its exit (it exits when the study is done);
* **three workers**: the same, and the speed-up over one;
* **one and three workers started before the study**, as services (`--forever`): the study
  timed from its enqueueing to its last run's end (a worker's own start, and its fork
  server's imports, are then behind it, as on machines that serve studies all along);
* **three workers, killed**: `kill -9` of one worker (and the run processes it drives, as
  when a machine dies) twice while its runs wait on model calls and once while a run is
  inside a tool call (the tool's effect done, its journal record not committed: the run
  process stops itself there, `CONTREACT_FAILPOINTS=stop:...`, and the worker is killed
  then); a fresh worker starts after each kill, as a machine that reboots. The study must
  complete, every run identical to the uninterrupted study's (reflections, memory, event
  counts by type; PROVENANCE and HOST_CHANGE, which each drive adds, left out), and only
  the model requests in flight at a kill may be repeated: the extra requests are at most
  the runs the killed workers held.

Every phase has its own database and its own two stub servers. The lease is
`CONTREACT_LEASE_S` (default here 5 s): a killed worker's runs move after it.
Run: `.venv/bin/python benchmarks/cost/study_workers.py [--quick] [--db-url URL] [--parallel N]`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

# The shared helpers (common.py, ...) are in benchmarks/, the folder above this one.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import Figure, bench_storage, child_env, parser, print_table, report, write_yaml

from contreact.checkpoints.cycles import cycle_records
from contreact.checkpoints.engines import dispose_engines, engine_for
from contreact.checkpoints.event_store import read_events
from contreact.checkpoints.storage import resolve_storage
from contreact.stub import StubServer
from contreact.studies.batch import load_batch
from contreact.tools.memory import memory_snapshot

MODELS = ["llama3.1:8b", "qwen3:8b", "mistral-nemo:12b", "gemma3:12b"]
STUDY = (MODELS, 3, 5)
"""The study: models, replicates, cycles."""
QUICK_STUDY = (MODELS[:2], 2, 4)
"""`--quick`: the smallest study in which three workers and two kills still have work."""
LATENCY_MS = 200
LEASE_S = 5.0
TOOL_STOP = "stop:before-commit:c2:s1:t0"
"""The tool call the third kill lands in: cycle 2's first tool call of its first answer."""


class Machine:
    """A `contreact worker` in a folder of its own, its own process group."""

    def __init__(
        self, root: Path, name: str, url: str, parallel: int, *flags: str, **env: str
    ) -> None:
        self.home = root / name
        self.home.mkdir(parents=True)
        environ = {
            **child_env(),
            "CONTREACT_DB_URL": url,
            "CONTREACT_HOME": str(self.home / "runs"),
            "CONTREACT_LEASE_S": str(LEASE_S),
            **env,
        }
        self.out = (self.home / "worker.out").open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "contreact", "worker", "--parallel", str(parallel), *flags],
            cwd=self.home,
            env=environ,
            stdout=self.out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )

    def kill(self) -> None:
        """SIGKILL the worker and the run processes it drives."""
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def stopped_child(self) -> bool:
        """Whether a run process of this worker stopped itself at the failpoint."""
        pending, seen = [self.proc.pid], set()
        while pending:  # run processes are the fork server's children: walk descendants
            pid = pending.pop()
            if pid in seen:
                continue
            seen.add(pid)
            try:
                state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
                children = [
                    int(c)
                    for f in Path(f"/proc/{pid}/task").glob("*/children")
                    for c in f.read_text().split()
                ]
            except OSError:
                continue
            if state == "T" and pid != self.proc.pid:
                return True
            pending.extend(children)
        return False


def leases_of(engine: Any, machine: Machine) -> list[str]:
    from sqlalchemy import text

    with engine.connect() as conn:
        rows = conn.execute(
            text("SELECT run_id, worker FROM contreact_leases WHERE NOT released")
        ).all()
    return [str(r) for r, w in rows if str(w).endswith(f":{machine.proc.pid}")]


def workers_beating(engine: Any) -> int:
    from sqlalchemy import text

    with engine.connect() as conn:
        if conn.execute(text("SELECT to_regclass('procrastinate_workers')")).scalar() is None:
            return 0
        return int(conn.execute(text("SELECT count(*) FROM procrastinate_workers")).scalar_one())


def completed(engine: Any) -> int:
    from sqlalchemy import text

    with engine.connect() as conn:
        return int(
            conn.execute(
                text("SELECT count(*) FROM contreact_runs WHERE status = 'completed'")
            ).scalar_one()
        )


def cycles_ended(engine: Any) -> int:
    from sqlalchemy import text

    with engine.connect() as conn:
        return int(conn.execute(text("SELECT count(*) FROM contreact_cycles")).scalar_one())


def record(engine: Any, run_id: str) -> dict[str, Any]:
    events = read_events(engine, run_id)
    return {
        "reflections": [r.reflection for r in cycle_records(engine, run_id)],
        "memory": memory_snapshot(engine, run_id),
        "events": Counter(
            e["event_type"] for e in events if e["event_type"] not in {"PROVENANCE", "HOST_CHANGE"}
        ),
    }


def phase(
    db_url: str,
    workers: int,
    parallel: int,
    kills: list[str],
    warm: bool = False,
    study: tuple[list[str], int, int] = STUDY,
) -> dict[str, Any]:
    """One study, from its workers' start to their exit.

    `warm`: the workers are started first, as services (`--forever`), and the study is
    timed from its enqueueing to its last run's end.
    """
    with (
        bench_storage(db_url) as where,
        tempfile.TemporaryDirectory(prefix="contreact-workers-") as tmp,
        StubServer(models=MODELS, latency_ms=LATENCY_MS).start() as a,
        StubServer(models=MODELS, latency_ms=LATENCY_MS).start() as b,
    ):
        root = Path(tmp)
        url = str(where.db_url)
        models, replicates, cycles = study
        config = write_yaml(
            root / "study.yaml",
            {
                "batch": "w",
                "models": models,
                "replicates": replicates,
                "cycles": cycles,
                "operator": {"mode": "auto", "no_reply": True},
                "ollama": {"hosts": [a.url, b.url]},
                "storage": {"url": url},
            },
        )
        engine = engine_for(resolve_storage(str(where.data_dir), url))
        machines: list[Machine] = []
        try:
            if warm:
                flags = ("--forever",)
                machines = [Machine(root, f"m{i}", url, parallel, *flags) for i in range(workers)]
                while workers_beating(engine) < workers:
                    time.sleep(0.1)
                time.sleep(5)  # their fork servers have imported the engine
            started = time.monotonic()
            enqueue = subprocess.run(
                [sys.executable, "-m", "contreact", "batch", str(config), "--no-work"],
                env={**child_env(), "CONTREACT_LEASE_S": str(LEASE_S)},
                capture_output=True,
                text=True,
                check=False,
            )
            assert enqueue.returncode == 0, enqueue.stderr
            if not warm:
                started = time.monotonic()
                machines = [Machine(root, f"m{i}", url, parallel) for i in range(workers)]
            held_at_kills = 0
            for n, kind in enumerate(kills):
                if kind == "tool":
                    victim = Machine(
                        root, f"tool{n}", url, parallel, CONTREACT_FAILPOINTS=TOOL_STOP
                    )
                    machines.append(victim)
                    deadline = time.monotonic() + 120
                    while not victim.stopped_child():
                        assert time.monotonic() < deadline, "the tool failpoint was never reached"
                        time.sleep(0.05)
                else:
                    victim = next(m for m in machines if m.proc.poll() is None)
                    mark = cycles_ended(engine) + 3
                    while cycles_ended(engine) < mark or not leases_of(engine, victim):
                        time.sleep(0.05)
                held_at_kills += len(leases_of(engine, victim))
                victim.kill()
                machines.remove(victim)
                if kind != "tool":  # the tool's victim came as a fourth machine
                    machines.append(Machine(root, f"r{n}", url, parallel))
            if warm:
                total = len(load_batch(config).runs)
                while completed(engine) < total:
                    time.sleep(0.05)
                wall = time.monotonic() - started
                for machine in machines:
                    machine.proc.send_signal(signal.SIGTERM)
                    machine.proc.wait(timeout=60)
            else:
                for machine in machines:
                    code = machine.proc.wait(timeout=900)
                    assert code == 0, (machine.home / "worker.out").read_text()
                wall = time.monotonic() - started
        finally:
            for machine in machines:  # a failed phase leaves no worker behind
                if machine.proc.poll() is None:
                    machine.kill()
        runs = [r.run_id for r in load_batch(config).runs]
        records = {r: record(engine, r) for r in runs}
        statuses = Counter(
            str(s)
            for s in engine.connect().exec_driver_sql("SELECT status FROM contreact_runs").scalars()
        )
        requests = len(a.requests()) + len(b.requests())
        dispose_engines()
    return {
        "wall": wall,
        "records": records,
        "requests": requests,
        "statuses": statuses,
        "held": held_at_kills,
    }


def main() -> None:
    args = parser(__doc__ or "")
    args.add_argument("--parallel", type=int, default=1, help="runs per worker at once")
    opts = args.parse_args()
    db_url = opts.db_url or "postgresql+psycopg://postgres@127.0.0.1:5432/test"
    # --quick: a smaller study, two kills, and no phases with workers started beforehand.
    study = QUICK_STUDY if opts.quick else STUDY
    kills = ["tool", "model"] if opts.quick else ["tool", "model", "model"]
    one = phase(db_url, 1, opts.parallel, [], study=study)
    three = phase(db_url, 3, opts.parallel, [], study=study)
    warm = (
        {}
        if opts.quick
        else {
            1: phase(db_url, 1, opts.parallel, [], warm=True, study=study),
            3: phase(db_url, 3, opts.parallel, [], warm=True, study=study),
        }
    )
    killed = phase(db_url, 3, opts.parallel, kills, study=study)
    same = sum(killed["records"][r] == one["records"][r] for r in one["records"])
    extra = killed["requests"] - one["requests"]

    def row(name: str, found: dict[str, Any], compare: bool = True) -> list[Any]:
        alike = sum(found["records"][r] == one["records"][r] for r in one["records"])
        completed = found["statuses"]["completed"]
        return [name, found["wall"], found["requests"], completed, alike if compare else "-"]

    rows = [row("1 worker", one, compare=False), row("3 workers", three)]
    if warm:
        rows.append(row("1 worker, started before the study", warm[1], compare=False))
        rows.append(row("3 workers, started before the study", warm[3]))
    rows.append(row(f"3 workers, {len(kills)} kills", killed))
    models, replicates, cycles = study
    print_table(
        ["phase", "wall s", "model requests", "runs completed", "runs as uninterrupted"],
        rows,
        title=f"{len(models)} models x {replicates} replicates x {cycles} cycles, 2 hosts at "
        f"{LATENCY_MS} ms, lease {LEASE_S} s",
    )
    runs = len(one["records"])
    figures = [
        Figure(
            "W1",
            "speed-up, 3 workers vs 1",
            one["wall"] / three["wall"],
            "x",
            target=2.5,
            higher_is_better=True,
        )
    ]
    if warm:
        figures.append(
            Figure(
                "W1b",
                "speed-up, 3 workers vs 1, workers started before the study",
                warm[1]["wall"] / warm[3]["wall"],
                "x",
                target=2.5,
                higher_is_better=True,
            )
        )
    report(
        [
            *figures,
            Figure(
                "W2",
                f"runs identical to the uninterrupted study after {len(kills)} kills",
                same,
                "",
                target=runs,
                higher_is_better=True,
            ),
            Figure(
                "W3",
                f"model requests repeated (at most the runs held at the kills: {killed['held']})",
                extra,
                "",
                target=killed["held"],
            ),
        ],
        opts.json,
    )


if __name__ == "__main__":
    main()
