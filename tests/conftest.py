"""Shared fixtures: the stub server, storage backends (SQLite, PostgreSQL) and a CLI driver.

End-to-end tests run the real `contreact` command in a subprocess against the stub over
real HTTP and a real database, and assert on what was persisted. PostgreSQL tests run
in CI (`CI=true`) and fail there if the server is absent; elsewhere they skip with a
reason.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from sqlalchemy import Engine, event

from contreact.stub import StubServer

ROOT = Path(__file__).resolve().parent.parent
PG_ADMIN_URL = os.environ.get("CONTREACT_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _pg_available() -> str | None:
    """None if PostgreSQL answers, else why not."""
    try:
        import psycopg

        with psycopg.connect(PG_ADMIN_URL, connect_timeout=3) as conn:
            conn.execute("select 1")
        return None
    except Exception as exc:  # noqa: BLE001 - any failure means "not available"
        return f"{type(exc).__name__}: {exc}".splitlines()[0]


@dataclass
class Backend:
    """Where a test's runs are stored, and the CLI flags that select it."""

    name: str
    data_dir: Path
    db_url: str | None = None
    env: dict[str, str] = field(default_factory=dict)

    @property
    def cli_args(self) -> list[str]:
        """Global flags for `contreact`."""
        args = ["--data-dir", str(self.data_dir)]
        if self.db_url:
            args += ["--db-url", self.db_url]
        return args

    def storage(self) -> Any:
        """The `Storage` the CLI will use."""
        from contreact.checkpoints.storage import resolve_storage

        return resolve_storage(self.data_dir, self.db_url)

    def storage_yaml(self) -> dict[str, Any]:
        """The `storage:` section of a config for this backend."""
        section: dict[str, Any] = {"data_dir": str(self.data_dir)}
        if self.db_url:
            section["url"] = self.db_url
        return section


@pytest.fixture
def sqlite_backend(tmp_path: Path) -> Backend:
    """A fresh SQLite data directory."""
    return Backend("sqlite", tmp_path / "runs")


@pytest.fixture
def postgres_backend(tmp_path: Path) -> Iterator[Backend]:
    """A fresh PostgreSQL database (created and dropped around the test)."""
    reason = _pg_available()
    if reason is not None:
        if IN_CI:
            pytest.fail(f"PostgreSQL must be available in CI at {PG_ADMIN_URL}: {reason}")
        pytest.skip(f"PostgreSQL not available at {PG_ADMIN_URL}: {reason}")
    import psycopg

    name = f"contreact_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base = PG_ADMIN_URL.rsplit("/", 1)[0]
    try:
        yield Backend(
            "postgres", tmp_path / "runs", f"postgresql+psycopg://{base.split('://', 1)[1]}/{name}"
        )
    finally:
        from contreact.checkpoints.engines import dispose_engines

        dispose_engines()
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest) -> Backend:
    """Each storage backend in turn."""
    fixture = "postgres_backend" if request.param == "postgres" else "sqlite_backend"
    return request.getfixturevalue(fixture)  # type: ignore[no-any-return]


@pytest.fixture
def stub() -> Iterator[StubServer]:
    """The stub server with the deterministic simulated explorer."""
    with StubServer().start() as server:
        yield server


def scripted_stub(script: dict[int, list[Any]], **extra: Any) -> StubServer:
    """A started stub answering from `script` (cycle -> list of step replies)."""
    return StubServer.from_scenario({"agent": "scripted", "script": script, **extra}).start()


def write_config(path: Path, backend: Backend, **fields: Any) -> Path:
    """Write a run config YAML for `backend`; `fields` override the defaults."""
    config: dict[str, Any] = {
        "run_id": "run-1",
        "model": "stub-model",
        "cycles": 3,
        "ollama": {"timeout_s": 20, "retries": 3, "retry_budget_s": 20},
        "storage": backend.storage_yaml(),
    }
    for key, value in fields.items():
        if isinstance(value, dict) and isinstance(config.get(key), dict):
            config[key] = {**config[key], **value}
        else:
            config[key] = value
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


def cli_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment the CLI subprocess runs in."""
    env = {k: v for k, v in os.environ.items() if k not in ("CONTREACT_FAILPOINTS", "OLLAMA_HOST")}
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


def cli(
    backend: Backend, *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run `python -m contreact` with the backend's flags; returns the finished process."""
    return subprocess.run(
        [sys.executable, "-m", "contreact", *backend.cli_args, *args],
        cwd=ROOT,
        env=cli_env(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


FOREGROUND = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])"
)
"""Run the rest of argv as a shell runs a command in the foreground: with Ctrl-C's default
action. A background job of a non-interactive shell (`cmd &` in a script, which is how a CI
runner may start the suite) ignores SIGINT, every process it starts inherits that, and
Python then installs no KeyboardInterrupt handler. The exec keeps the pid."""


def cli_start(
    backend: Backend, *args: str, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    """Start `python -m contreact` without waiting (for kill and signal tests)."""
    return subprocess.Popen(
        [sys.executable, "-c", FOREGROUND, "-m", "contreact", *backend.cli_args, *args],
        cwd=ROOT,
        env=cli_env(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )


def kill_when(proc: subprocess.Popen[str], ready: Any, timeout: float = 60) -> None:
    """SIGKILL `proc` as soon as `ready()` is true (fails the test if it never is)."""
    deadline = time.monotonic() + timeout
    while not ready():
        if proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(
                f"process ended before the kill point (rc {proc.returncode}): {err}{out}"
            )
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError("kill point never reached")
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)


def read_log(backend: Backend, run_id: str) -> list[dict[str, Any]]:
    """The run's JSONL event log."""
    path = backend.data_dir / "logs" / f"{run_id}.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


VOLATILE = {
    "timestamp",
    "duration_s",
    "seconds",
    "model_seconds",
    "wait_s",
    "host",
    "process_alive",
}


def stable(value: Any) -> Any:
    """A value with wall-clock fields removed, for comparing two runs of one script."""
    if isinstance(value, dict):
        return {k: stable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [stable(v) for v in value]
    return value


def outcome(backend: Backend, run_id: str) -> tuple[list[Any], dict[str, str], list[Any]]:
    """What a run left behind, read from its database and its JSONL log.

    (reflection, flags) per cycle, the memory, and the stable event summary. Read in
    process: the CLI's own `show` and `memory` output is tested where it is the subject.
    """
    from contreact.checkpoints.cycles import cycle_records
    from contreact.checkpoints.engines import engine_for
    from contreact.tools.memory import memory_snapshot

    engine = engine_for(backend.storage())
    cycles = [(r.cycle, r.reflection, r.flags) for r in cycle_records(engine, run_id)]
    return cycles, memory_snapshot(engine, run_id), event_summary(read_log(backend, run_id))


def event_summary(events: Sequence[dict[str, Any]]) -> list[tuple[int, str, Any]]:
    """(cycle, type, stable payload) of every event, in order."""
    return [(e["cycle_number"], e["event_type"], stable(e["payload"])) for e in events]


ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07|\r")


class Terminal:
    """A `contreact` process on a pseudo-terminal, driven like a person at a keyboard."""

    def __init__(self, backend: Backend, *args: str, env: dict[str, str] | None = None) -> None:
        import pty

        self.master, slave = pty.openpty()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "contreact", *backend.cli_args, *args],
            cwd=ROOT,
            env=cli_env({"COLUMNS": "200", "TERM": "xterm", **(env or {})}),
            stdin=slave,
            stdout=slave,
            stderr=slave,
            start_new_session=True,
        )
        os.close(slave)
        self.seen = ""
        self.transcript = ""
        """Everything the process printed so far (ANSI codes removed)."""

    def expect(self, pattern: str, timeout: float = 60) -> re.Match[str]:
        """Wait until the screen (ANSI codes removed) matches `pattern`; return the match."""
        import select

        deadline = time.monotonic() + timeout
        regex = re.compile(pattern)
        while True:
            match = regex.search(self.seen)
            if match:
                self.seen = self.seen[match.end() :]
                return match
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"never saw {pattern!r}; screen:\n{self.seen}")
            ready, _, _ = select.select([self.master], [], [], min(left, 0.2))
            if ready:
                try:
                    chunk = os.read(self.master, 65536)
                except OSError:
                    chunk = b""
                if not chunk and self.proc.poll() is not None:
                    raise AssertionError(f"process ended before {pattern!r}; screen:\n{self.seen}")
                text = ANSI.sub("", chunk.decode("utf-8", "replace"))
                self.seen += text
                self.transcript += text

    def send(self, text: str) -> None:
        """Type a line."""
        os.write(self.master, (text + "\n").encode())

    def close(self, timeout: float = 30) -> int:
        """Wait for the process to end; returns its exit code."""
        try:
            return self.proc.wait(timeout=timeout)
        finally:
            os.close(self.master)


def trace_sql(engine: Engine, seen: Callable[[str], None]) -> None:
    """Call `seen` with every statement SQLite runs on the engine's connections.

    SQLite's own trace, not SQLAlchemy's events: the journal runs its statements on the
    raw DBAPI cursor, which SQLAlchemy never sees.
    """
    event.listen(engine, "checkout", lambda dbapi, *_: dbapi.set_trace_callback(seen))
    event.listen(engine, "checkin", lambda dbapi, *_: dbapi and dbapi.set_trace_callback(None))


class Statements:
    """Counts the SQL statements an engine runs."""

    def __init__(self, engine: Engine) -> None:
        self.count = 0
        trace_sql(engine, self._seen)

    def _seen(self, statement: str) -> None:
        if statement.lstrip().upper().startswith(("SELECT", "INSERT", "UPDATE", "DELETE")):
            self.count += 1
