"""A run's own process, forked from a server that imported the engine once.

Every run of a batch or a study is driven in a process of its own (`engine.child`). Started
as a fresh interpreter, each such process would spend seconds of CPU importing LangGraph,
LangChain and SQLAlchemy before its first model call; on a small machine driving several
runs at once, that, not the model, would set the pace. Python's `forkserver` imports the
engine once, in a single-threaded server process, and forks each run's process from it:
the process starts with the engine loaded.

The forked process gets its own environment and log file and enters the engine's named
entry; it still dies with the process that asked for it (`engine.child.die_with_parent`),
and the fork server exits once that process and every run process it forked are gone.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import threading
from collections.abc import Mapping
from multiprocessing.context import ForkServerContext
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from contreact.engine.child import RunRequest

PRELOAD = ["contreact.engine.child"]
"""What the fork server imports once: the engine and a run process's entry into it."""

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


def _run_process(request: RunRequest, env: Mapping[str, str], log: str) -> None:
    """The forked process: the run's own process with `env`, its output appended to `log`."""
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    # Every setting is read when used, not when imported, so the environment handed over
    # here rules this process although the server imported the engine under another.
    os.environ.clear()
    os.environ.update(env)
    from contreact.engine.child import run_process_main

    code = run_process_main(request)
    sys.stdout.flush()
    sys.stderr.flush()
    sys.exit(code)


class RunProcess:
    """A run's own process, forked from the fork server (see the module doc)."""

    def __init__(self, request: RunRequest, env: Mapping[str, str], log: Path) -> None:
        self.process: Any = _context().Process(
            target=_run_process, args=(request, dict(env), str(log)), daemon=False
        )
        self.process.start()

    def wait(self) -> int:
        """Its exit code (negative: the signal that killed it)."""
        self.process.join()
        return int(self.process.exitcode)

    def terminate(self) -> None:
        """SIGTERM: the run is recorded interrupted and the process exits."""
        self.process.terminate()
