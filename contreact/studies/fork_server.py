"""A run's own process, forked from a server that imported the engine once.

Every run of a batch or a study is driven in a process of its own: a crash takes one run
down, the cores are used, and a queued run's lease token goes with that process's
connections (`checkpoints.fencing`). Started as `python -m contreact`, each such process
spent two to three CPU-seconds importing LangGraph, LangChain and SQLAlchemy before its
first model call; on a two-core machine driving three runs at once, that, not the model,
set the pace. Python's `forkserver` imports them once, in a single-threaded server
process, and forks each run's process from it: the process starts with the engine loaded.

The forked process is the `contreact` command line as before, with its own argv,
environment and log file, and it still dies with the process that asked for it
(`CONTREACT_PARENT_PID`, watched by `cli.app.die_with_parent`); the fork server exits once
that process and every run process it forked are gone.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import threading
from collections.abc import Mapping, Sequence
from multiprocessing.context import ForkServerContext
from pathlib import Path
from typing import Any

PRELOAD = ["contreact.cli", "contreact.engine.runner"]
"""What the fork server imports once: the command line and the engine behind `run`."""

_server: ForkServerContext | None = None
_server_lock = threading.Lock()


def _context() -> ForkServerContext:
    global _server
    with _server_lock:
        if _server is None:
            context = multiprocessing.get_context("forkserver")
            assert isinstance(context, ForkServerContext)
            context.set_forkserver_preload(PRELOAD)
            _server = context
        return _server


def warm() -> None:
    """Start the fork server now, so its imports overlap what the caller does meanwhile."""
    from multiprocessing import forkserver

    _context()
    forkserver.ensure_running()


IMPORT_TIME_ENV = (
    "CONTREACT_FAILPOINTS",
    "CONTREACT_TALLY_FILE",
    "CONTREACT_SQLITE_BUSY_TIMEOUT_MS",
)
"""Settings read when a module is imported: the fork server read them when it started."""


def become(argv: Sequence[str], env: Mapping[str, str]) -> None:
    """Make a process forked with the engine loaded the command `contreact ARGV` in `env`.

    Used by this module's fork server and by `contreact.daemon`. When a setting read at
    import differs (a test's failpoints), the preloaded modules hold the wrong value: the
    process starts afresh, importing with `env`, and runs the command itself
    (`CONTREACT_DAEMON=off`: handed to a daemon, it would be started afresh again).
    """
    if any(env.get(k) != os.environ.get(k) for k in IMPORT_TIME_ENV):
        fresh = {**env, "CONTREACT_DAEMON": "off"}
        os.execve(sys.executable, [sys.executable, "-m", "contreact", *argv], fresh)
    os.environ.clear()
    os.environ.update(env)
    sys.argv = ["contreact", *argv]


def _command(argv: Sequence[str], env: Mapping[str, str], log: str) -> None:
    """The forked process: `contreact ARGV` with `env`, its output appended to `log`."""
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    become(argv, env)
    from contreact.cli import main

    main()


class RunProcess:
    """`contreact ARGV` in a process forked from the fork server (see the module doc)."""

    def __init__(self, argv: Sequence[str], env: Mapping[str, str], log: Path) -> None:
        self.process: Any = _context().Process(
            target=_command, args=(list(argv), dict(env), str(log)), daemon=False
        )
        self.process.start()

    def wait(self) -> int:
        """Its exit code (negative: the signal that killed it)."""
        self.process.join()
        return int(self.process.exitcode)

    def terminate(self) -> None:
        """SIGTERM: the run is recorded interrupted and the process exits."""
        self.process.terminate()
