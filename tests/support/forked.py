"""`contreact` commands, each in a process of its own, without import time.

A fresh `python -m contreact` spends seconds of CPU importing the engine before it touches
the database. Over a suite that starts hundreds of commands that is most of its CPU, and a
test of processes racing (several first starts on one new database) needs them to start at
the same moment, which import time spreads out. Here a fork server imports the command line
and the engine once; each command is a process forked from it that runs `contreact ARGS` as
the console script does: its own environment, working folder and exit status, its output to
files, no input, killed by a signal as any process is. `run_one` is one such command;
`run_together` starts a group at a barrier.

The workers' own fork server (`contreact.studies.fork_server`) starts a study's runs the same
way; a test of start-up itself (imports, `--help`'s speed) starts a fresh interpreter.
"""

from __future__ import annotations

import atexit
import multiprocessing
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from multiprocessing.context import ForkServerContext
from pathlib import Path
from typing import Any

PRELOAD = [
    "contreact.cli",
    "contreact.cli.runs",
    "contreact.engine.runner",
    "contreact.studies.batch",
    "support.forked",
]
"""What the fork server imports once (the commands' own imports happen when they run)."""

_context: ForkServerContext | None = None


def _server() -> ForkServerContext:
    global _context
    if _context is None:
        context = multiprocessing.get_context("forkserver")
        assert isinstance(context, ForkServerContext)
        context.set_forkserver_preload(PRELOAD)
        _context = context
    return _context


def _one(argv: list[str], env: dict[str, str], cwd: str, out: str, err: str) -> None:
    """The forked process of `run_one`: `contreact ARGV`, stdout and stderr to files."""
    for fd, path, flags in (
        (0, os.devnull, os.O_RDONLY),
        (1, out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
        (2, err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
    ):
        opened = os.open(path, flags, 0o600)
        os.dup2(opened, fd)
        os.close(opened)
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    # What an interpreter would have put on its path at start, before the installed packages.
    sys.path[:0] = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    _exit_with(argv)


def _exit_with(argv: list[str], gate: Any = None) -> None:
    """Run `contreact ARGV` here (after `gate`, if any) and end the process with its status."""
    from contreact.cli import main

    sys.argv = ["contreact", *argv]
    if gate is not None:
        gate.wait()
    code = 0
    try:
        main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    # What an interpreter does as it exits: the exit handlers (a tracer's last spans are
    # sent from one), then the streams.
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def run_one(
    argv: list[str], env: dict[str, str], cwd: Path, timeout: float
) -> subprocess.CompletedProcess[str]:
    """`contreact ARGV` in a forked process, as `subprocess.run` would report it."""
    with tempfile.TemporaryDirectory(prefix="contreact-cli-") as folder:
        out, err = Path(folder) / "stdout", Path(folder) / "stderr"
        process = _server().Process(target=_one, args=(argv, env, str(cwd), str(out), str(err)))
        process.start()
        process.join(timeout)
        if process.exitcode is None:
            process.kill()
            process.join()
            raise subprocess.TimeoutExpired(["contreact", *argv], timeout)
        read = {"encoding": "utf-8", "errors": "replace"}
        return subprocess.CompletedProcess(
            ["contreact", *argv], process.exitcode, out.read_text(**read), err.read_text(**read)
        )


def _command(argv: list[str], env: dict[str, str], gate: Any, out: str) -> None:
    """The forked process: `contreact ARGV` once every process of the group is ready."""
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    os.environ.clear()
    os.environ.update(env)
    _exit_with(argv, gate)


@dataclass(frozen=True)
class Finished:
    """How one command of the group ended."""

    argv: list[str]
    code: int | None
    """Its exit status (None: still running at the timeout, and killed)."""
    output: str


def run_together(
    commands: list[list[str]], env: dict[str, str], folder: Path, timeout: float = 180
) -> list[Finished]:
    """Run `contreact ARGS` for each of `commands` at once, each in its own process."""
    context = _server()
    gate = context.Barrier(len(commands))
    outs = [folder / f"command-{i}.out" for i in range(len(commands))]
    processes = [
        context.Process(target=_command, args=(argv, env, gate, str(out)))
        for argv, out in zip(commands, outs, strict=True)
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout)
        if process.exitcode is None:
            process.kill()
            process.join()
    return [
        Finished(argv, p.exitcode, out.read_text(encoding="utf-8", errors="replace"))
        for argv, p, out in zip(commands, processes, outs, strict=True)
    ]
