"""`contreact` commands started together, each in a process of its own, without import time.

A test of processes racing (several first starts on one new database) needs them to start
at the same moment, and many times over. A fresh `python -m contreact` spends seconds of CPU
importing the engine before it touches the database, which both spreads the starts out and
makes the test slow. Here a fork server imports the command line and the engine once; each
command is a process forked from it that waits at a barrier with the others, then runs
`contreact ARGS` as the console script does (its own environment, its output to a file).
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from dataclasses import dataclass
from multiprocessing.context import ForkServerContext
from pathlib import Path
from typing import Any

PRELOAD = ["contreact.cli", "contreact.engine.runner", "support.forked"]
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


def _command(argv: list[str], env: dict[str, str], gate: Any, out: str) -> None:
    """The forked process: `contreact ARGV` once every process of the group is ready."""
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    os.environ.clear()
    os.environ.update(env)
    from contreact.cli import main

    sys.argv = ["contreact", *argv]
    gate.wait()
    code = 0
    try:
        main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


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
