"""`contreact daemon`: commands started from a resident process behave as fresh ones.

A command the daemon starts must be indistinguishable from one run in its own process,
but for the time it takes: the same records, output, exit codes, Ctrl-C and kill
behaviour, the same environment (settings read at import included), and never code
older than the files on disk. Each test starts its own daemon on a socket of its own
(`CONTREACT_DAEMON`), so no other test's commands reach it.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from contreact.daemon import ask
from contreact.launch import Lines, send
from contreact.stub import StubServer
from support.backends import Backend
from support.cli import cli, cli_start
from support.runs import outcome, write_config
from support.stub import scripted_stub

CYCLE = [
    {"tool_calls": [{"name": "write", "arguments": {"key": "k{cycle}", "value": "v{cycle}"}}]},
    {"tool_calls": [{"name": "read", "arguments": {"key": "k{cycle}"}}]},
    {"content": "Reflection for cycle {cycle}."},
]


class Daemon:
    """A daemon of the test's own; `env` sends a command to it, `served` counts them."""

    def __init__(self, backend: Backend) -> None:
        # A Unix socket's path is limited to 107 bytes: pytest's tmp_path can be longer.
        self.folder = Path(tempfile.mkdtemp(prefix="crd-"))
        self.socket = self.folder / "d.sock"
        self.backend = backend
        self.env = {"CONTREACT_DAEMON": str(self.socket)}

    def served(self) -> int:
        answer = ask(self.socket, {"status": True})
        assert answer is not None, "the daemon is not serving"
        return int(answer["status"]["served"])

    def pid(self) -> int:
        answer = ask(self.socket, {"status": True})
        assert answer is not None
        return int(answer["status"]["pid"])


@pytest.fixture
def daemon(sqlite_backend: Backend) -> Iterator[Daemon]:
    started = Daemon(sqlite_backend)
    result = cli(sqlite_backend, "daemon", "start", "--idle-minutes", "10", env=started.env)
    assert result.returncode == 0, result.stderr
    pid = started.pid()
    try:
        yield started
    finally:
        cli(sqlite_backend, "daemon", "stop", env=started.env)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        shutil.rmtree(started.folder, ignore_errors=True)  # outside tmp_path: see `Daemon`


Done = subprocess.CompletedProcess[str]


def drive(
    backend: Backend, tmp_path: Path, server: StubServer, run_id: str, env: dict[str, str]
) -> tuple[Done, Done]:
    """`run` one cycle and `resume` one more; the two processes' results."""
    config = write_config(
        tmp_path / f"{run_id}.yaml", backend, run_id=run_id, cycles=1, ollama={"host": server.url}
    )
    first = cli(backend, "run", str(config), env=env)
    second = cli(backend, "resume", run_id, "--cycles", "1", env=env)
    return first, second


def timeless(output: str) -> str:
    """Progress lines without their timings (`29 tokens out in 0.01 s · 2685.2 tok/s`)."""
    return re.sub(r"in [\d.]+ s · [\d.]+ tok/s", "", output)


def test_a_run_and_resume_started_by_the_daemon_are_those_of_fresh_processes(
    tmp_path: Path, daemon: Daemon
) -> None:
    backend = daemon.backend
    with scripted_stub({1: CYCLE, 2: CYCLE}) as server:
        cold = drive(backend, tmp_path, server, "cold", {})
        assert daemon.served() == 0
        warm = drive(backend, tmp_path, server, "warm", daemon.env)
    assert daemon.served() == 2
    # It compiled its statements before forking (`statements.compile_all`).
    answer = ask(daemon.socket, {"status": True})
    assert answer is not None and answer["status"]["compiled"] >= 15
    for fresh, started in zip(cold, warm, strict=True):
        assert (fresh.returncode, started.returncode) == (0, 0), started.stderr
        assert timeless(started.stdout.replace("warm", "cold")) == timeless(fresh.stdout)
        assert started.stderr == fresh.stderr == ""
    assert outcome(backend, "warm") == outcome(backend, "cold")
    assert [c[1] for c in outcome(backend, "warm")[0]] == [
        "Reflection for cycle 1.",
        "Reflection for cycle 2.",
    ]


def on_terminal(backend: Backend, *args: str, env: dict[str, str]) -> bytes:
    """Everything `contreact ARGS` writes to a terminal, escape codes and all."""
    import pty

    from support.cli import cli_env
    from support.paths import ROOT

    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "contreact", *backend.cli_args, *args],
        cwd=ROOT,
        env=cli_env({"COLUMNS": "120", "TERM": "xterm", **env}),
        stdin=slave,
        stdout=slave,
        stderr=slave,
        start_new_session=True,
    )
    os.close(slave)
    seen = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: every process holding the terminal has ended
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    assert proc.wait(timeout=30) == 0, seen
    return seen


def test_a_command_started_by_the_daemon_writes_to_the_terminal_as_its_own_would(
    tmp_path: Path, daemon: Daemon
) -> None:
    # The daemon's own output is a log file: colours, width and line buffering are the
    # client's terminal's, detected anew in the command's process.
    with scripted_stub({1: CYCLE, 2: CYCLE}) as server:
        drive(daemon.backend, tmp_path, server, "run-1", {})
    fresh = on_terminal(daemon.backend, "show", "run-1", env={})
    started = on_terminal(daemon.backend, "show", "run-1", env=daemon.env)
    assert daemon.served() == 1
    assert b"\x1b[1mCycle 1" in fresh
    assert started == fresh


def test_bad_input_is_one_line_and_exit_2_through_the_daemon(daemon: Daemon) -> None:
    result = cli(daemon.backend, "resume", "no-such-run", "--cycles", "1", env=daemon.env)
    assert daemon.served() == 1
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and "no run named no-such-run" in result.stderr


def started_run(
    daemon: Daemon, tmp_path: Path, server: StubServer
) -> tuple[subprocess.Popen[str], str]:
    """A long run started through the daemon, once its first cycle's reflection is printed.

    The line arrives while the run goes on: the command's stdout is the client's pipe,
    written through as `PYTHONUNBUFFERED` asks.
    """
    host = {"host": server.url}
    config = write_config(
        tmp_path / "long.yaml", daemon.backend, run_id="long", cycles=50, ollama=host
    )
    proc = cli_start(daemon.backend, "run", str(config), env=daemon.env)
    assert proc.stdout is not None
    seen = ""
    while "cycle 1 reflection" not in seen:
        line = proc.stdout.readline()
        assert line, f"the run ended early: {proc.communicate()}"
        seen += line
    return proc, seen


def driver_pid(backend: Backend, run_id: str) -> int:
    from contreact.checkpoints.engines import engine_for
    from contreact.checkpoints.registry import get_run

    return int(get_run(engine_for(backend.storage()), run_id).pid)


def test_ctrl_c_reaches_the_command_and_its_status_comes_back(
    tmp_path: Path, daemon: Daemon
) -> None:
    with scripted_stub({c: CYCLE for c in range(1, 51)}, latency_ms=50) as server:
        proc, _ = started_run(daemon, tmp_path, server)
        os.kill(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    assert daemon.served() == 1
    assert proc.returncode == 130, err
    assert err.strip().endswith("interrupted")
    assert "Traceback" not in err
    status = cli(daemon.backend, "status", "long")
    assert "interrupted" in status.stdout


def test_the_command_dies_with_its_client(tmp_path: Path, daemon: Daemon) -> None:
    with scripted_stub({c: CYCLE for c in range(1, 51)}, latency_ms=50) as server:
        proc, _ = started_run(daemon, tmp_path, server)
        driver = driver_pid(daemon.backend, "long")
        assert driver != proc.pid  # the daemon's process drives the run, not the client
        proc.kill()
        proc.communicate(timeout=30)
        deadline = time.monotonic() + 10
        while _alive(driver):
            assert time.monotonic() < deadline, "the daemon's process outlived its client"
            time.sleep(0.05)
        # As after a kill -9 of a command of its own: the run resumes where it stopped.
        resumed = cli(daemon.backend, "resume", "long", "--cycles", "1", env=daemon.env)
    assert resumed.returncode == 0, resumed.stderr


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_settings_read_at_import_reach_the_command_and_a_death_by_signal_comes_back(
    tmp_path: Path, daemon: Daemon
) -> None:
    # Failpoints are read when the daemon imports the engine: a command asking for other
    # ones is started afresh, and dies of its SIGKILL as a command of its own would.
    with scripted_stub({1: CYCLE}) as server:
        config = write_config(
            tmp_path / "r.yaml", daemon.backend, cycles=1, ollama={"host": server.url}
        )
        env = {**daemon.env, "CONTREACT_FAILPOINTS": "before-commit:c1:s1:t0"}
        killed = cli(daemon.backend, "run", str(config), env=env)
        assert daemon.served() == 1
        assert killed.returncode == -signal.SIGKILL
        resumed = cli(daemon.backend, "resume", "run-1", env=daemon.env)
    assert resumed.returncode == 0, resumed.stderr
    assert [c[1] for c in outcome(daemon.backend, "run-1")[0]] == ["Reflection for cycle 1."]


def test_a_daemon_shown_other_code_stops_and_the_command_runs_in_its_own_process(
    daemon: Daemon,
) -> None:
    pid = daemon.pid()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(str(daemon.socket))
        request = {"argv": ["list"], "cwd": "/", "env": {}, "umask": 0o22, "fingerprint": "old"}
        send(sock, {"run": request}, [0, 1, 2])
        assert Lines(sock).next() == {"stale": True}
    deadline = time.monotonic() + 10
    while _alive(pid) or daemon.socket.exists():
        assert time.monotonic() < deadline, "the daemon went on serving other code"
        time.sleep(0.05)
    result = cli(daemon.backend, "resume", "no-such-run", env=daemon.env)
    assert result.returncode == 2 and "no run named" in result.stderr
    status = cli(daemon.backend, "daemon", "status", env=daemon.env)
    assert status.returncode == 1
    assert "No daemon serves" in status.stdout
