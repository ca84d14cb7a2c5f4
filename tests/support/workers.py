"""Workers standing in for machines: `contreact worker` processes with their own folders.

Each worker runs in its own working directory with its own `CONTREACT_HOME`, as on another
machine; only the PostgreSQL database (by `CONTREACT_DB_URL`) and the Ollama hosts are
shared. A worker is its own process group, so a test can freeze or kill it with the run
it drives (a machine that stops stops everything on it).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from support.cli import cli_env
from support.paths import ROOT

LEASE_S = 4.0
"""The tests' lease: short, so that a takeover happens within seconds."""


def queue_env(db_url: str) -> dict[str, str]:
    """What every process of a queued study gets: the database and the lease."""
    return {"CONTREACT_DB_URL": db_url, "CONTREACT_LEASE_S": str(LEASE_S)}


class Machine:
    """A `contreact worker` process in a folder of its own."""

    def __init__(self, root: Path, name: str, db_url: str, *args: str) -> None:
        self.home = root / name
        self.home.mkdir(parents=True, exist_ok=True)
        env = cli_env({**queue_env(db_url), "CONTREACT_HOME": str(self.home / "runs")})
        env["PYTHONPATH"] = str(ROOT)
        self.log = self.home / "worker.out"
        with self.log.open("w") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "contreact", "worker", *args],
                cwd=self.home,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )

    def output(self) -> str:
        """What the worker printed so far."""
        return self.log.read_text(encoding="utf-8", errors="replace")

    def child_logs(self) -> str:
        """What the run processes it started printed."""
        return "".join(
            p.read_text(encoding="utf-8", errors="replace")
            for p in (self.home / "runs").rglob("*.out")
        )

    def signal(self, sig: signal.Signals) -> None:
        """Send `sig` to the worker and everything it started."""
        os.killpg(self.proc.pid, sig)

    def wait(self, timeout: float) -> int:
        """The worker's exit code, once it exits by itself."""
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.signal(signal.SIGKILL)
            raise AssertionError(f"worker did not finish:\n{self.output()}") from None


def wait_for(ready: Callable[[], Any], timeout: float = 60, what: str = "") -> Any:
    """Poll `ready()` until it returns something true."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = ready()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"never happened: {what}")


def run_record(storage: Any, run_id: str) -> dict[str, Any]:
    """What a run left in the database: reflections, memory, journal, event counts.

    Read from the database alone: each worker mirrors events to JSONL in its own folder.
    """
    from contreact.checkpoints.cycles import cycle_records
    from contreact.checkpoints.engines import engine_for
    from contreact.checkpoints.event_store import read_events
    from contreact.tools.memory import memory_snapshot
    from support.runs import PER_DRIVE

    engine = engine_for(storage)
    events = read_events(engine, run_id)
    return {
        "reflections": [r.reflection for r in cycle_records(engine, run_id)],
        "memory": memory_snapshot(engine, run_id),
        "events": Counter(
            e["event_type"] for e in events if e["event_type"] not in PER_DRIVE | {"HOST_CHANGE"}
        ),
    }


def table_rows(storage: Any) -> dict[str, int]:
    """How many rows each table a run writes holds."""
    from sqlalchemy import text

    from contreact.checkpoints.engines import engine_for
    from contreact.checkpoints.fencing import RUN_TABLES, THREAD_TABLES

    with engine_for(storage).connect() as conn:
        return {
            t: int(conn.execute(text(f"SELECT count(*) FROM {t}")).scalar_one())
            for t in (*RUN_TABLES, *THREAD_TABLES)
        }
