"""Drive the real `contreact` command: as a process, in the background, on a terminal, or here.

End-to-end tests run the CLI as a user would, against the stub over real HTTP and a real
database, and assert on what was persisted. A test about the process itself (start-up,
kills, signals, pipes, terminals) starts one; the others run the same command in the test
process (`cli_in_process`), which spares each command an interpreter start.
"""

from __future__ import annotations

import codecs
import os
import re
import signal
import subprocess
import sys
import time
from typing import Any

from support.backends import Backend
from support.paths import ROOT

STRIPPED = ("CONTREACT_FAILPOINTS", "OLLAMA_HOST")
"""Variables of the test's own environment the CLI never sees (a test passes them itself)."""


def cli_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment the CLI subprocess runs in."""
    env = {k: v for k, v in os.environ.items() if k not in STRIPPED}
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


def cli(
    backend: Backend,
    *args: str,
    env: dict[str, str] | None = None,
    timeout: float = 120,
    fresh: bool = False,
) -> subprocess.CompletedProcess[str]:
    """Run `contreact` with the backend's flags in a process of its own; the finished process.

    The process is forked from a server that imported the engine once (`support.forked`):
    its own environment, folder, exit status and kills, without seconds of imports each time.
    `fresh` starts a new interpreter (`python -m contreact`), for tests of start-up itself.
    """
    if not fresh:
        from support.forked import run_one

        return run_one([*backend.cli_args, *args], cli_env(env), ROOT, timeout)
    return subprocess.run(
        [sys.executable, "-m", "contreact", *backend.cli_args, *args],
        cwd=ROOT,
        env=cli_env(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def cli_in_process(
    backend: Backend, *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """`contreact ARGS` run by this process: what `cli` returns, without an interpreter start.

    For tests whose subject is what a command does or prints, not the process around it
    (start-up, signals, kills, terminals): the same typer application gets the same argv
    and environment, and its exit code, stdout and stderr come back as from `cli`. A fresh
    `python -m contreact` spends about two CPU-seconds importing the engine; here that is
    paid once per test worker. An exception the CLI does not turn into an exit code is
    raised here, failing the test as the traceback would; a command still running after
    `timeout` seconds ends the test worker with every thread's traceback (faulthandler),
    as `cli`'s timeout would end the subprocess.

    The environment is set for the command (`CliRunner`'s `env`), so only settings read
    when a command runs take effect: failpoints and the tally file are read at import,
    and tests that set them use `cli`.
    """
    import faulthandler

    from typer.testing import CliRunner

    from contreact.checkpoints.engines import dispose_engines
    from contreact.cli.app import app

    unset: dict[str, str | None] = {name: None for name in STRIPPED}
    faulthandler.dump_traceback_later(timeout, exit=True)
    try:
        result = CliRunner().invoke(app, [*backend.cli_args, *args], env={**unset, **(env or {})})
    finally:
        faulthandler.cancel_dump_traceback_later()
        # What the process's exit would do: close its connections (SQLite's last one
        # folds the write-ahead log into the file), so later commands meet the database
        # as they would after a `cli` call.
        dispose_engines()
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    argv = ["contreact", *backend.cli_args, *args]
    return subprocess.CompletedProcess(argv, result.exit_code, result.stdout, result.stderr)


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
        self.raw = ""
        """Everything the process printed so far, ANSI codes included."""
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._pending = ""
        """Printed text whose last escape sequence is not complete yet (split across reads)."""

    def _take(self, chunk: bytes) -> None:
        # A read may end inside a multi-byte character or an escape sequence: both are kept
        # until the rest arrives, so no half of a colour code is left on the screen.
        decoded = self._decoder.decode(chunk)
        self.raw += decoded
        raw = self._pending + decoded
        text = ANSI.sub("", raw)
        cut = text.rfind("\x1b")
        if cut < 0 or len(text) - cut > 32:  # no sequence open (or one ANSI does not know)
            cut = len(text)
        self._pending, text = text[cut:], text[:cut]
        self.seen += text
        self.transcript += text

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
                self._take(chunk)

    def send(self, text: str) -> None:
        """Type a line."""
        os.write(self.master, (text + "\n").encode())

    def close(self, timeout: float = 30) -> int:
        """Wait for the process to end; returns its exit code."""
        try:
            return self.proc.wait(timeout=timeout)
        finally:
            os.close(self.master)
