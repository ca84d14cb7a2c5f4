"""`contreact daemon start|stop|status`: the resident process commands start warm from."""

from __future__ import annotations

import subprocess
import sys
import time
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from contreact.cli.app import BadInputError, command, fail, out
from contreact.launch import WARM, socket_path

START_TIMEOUT_S = 60.0
"""How long `start` waits for the daemon to import the engine and answer."""


class Action(StrEnum):
    """What `contreact daemon` does."""

    start = "start"
    stop = "stop"
    status = "status"


@command(touches_runs=False)
def daemon(
    action: Annotated[Action, typer.Argument(help="start, stop or status.")] = Action.status,
    idle_minutes: Annotated[
        float | None,
        typer.Option("--idle-minutes", min=0.1, help="Stop after this long without a command."),
    ] = None,
) -> None:
    """Keep a process with the engine imported, so that run, resume and the like start at once.

    A fresh command spends 1.5-3 s importing LangGraph, LangChain and SQLAlchemy; with the
    daemon up, these commands are forked from it, with your arguments, folder, environment
    and terminal, and Ctrl-C, kills and exit codes work as before. One daemon per install;
    it stops itself when contreact's files or the installed packages change.
    `CONTREACT_DAEMON=off` runs a command without it.
    """
    from contreact.daemon import ask

    path = socket_path()
    if path is None:
        raise BadInputError("CONTREACT_DAEMON=off: no daemon is used; unset it to use one")
    answer = ask(path, {"status": True})
    if action is Action.status:
        if answer is None:
            out.print(f"No daemon serves this install ({path}).", markup=False)
            raise typer.Exit(1)
        info = answer["status"]
        idle = info["idle"]
        out.print(
            f"Daemon {info['pid']} serving at {path}: up {time.time() - info['since']:.0f} s, "
            f"{info['served']} commands started"
            + (f", stops after {idle / 60:g} idle minutes" if idle else "")
            + ".",
            markup=False,
        )
    elif action is Action.stop:
        if answer is None:
            out.print("No daemon was serving.", markup=False)
            return
        ask(path, {"stop": True})
        deadline = time.monotonic() + 10
        while path.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        out.print(f"Daemon {answer['status']['pid']} stopped.", markup=False)
    elif answer is not None:
        out.print(f"Daemon {answer['status']['pid']} already serves at {path}.", markup=False)
    else:
        _start(path, idle_minutes)


def _start(where: Path, idle_minutes: float | None) -> None:
    from contreact.daemon import ask

    where.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    log = where.with_suffix(".log")
    argv = [sys.executable, "-m", "contreact.daemon", str(where)]
    if idle_minutes:
        argv.append(str(idle_minutes * 60))
    with open(log, "ab") as sink:
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # not stopped by this terminal's Ctrl-C or hang-up
        )
    deadline = time.monotonic() + START_TIMEOUT_S
    while ask(where, {"status": True}) is None:
        if process.poll() is not None or time.monotonic() > deadline:
            tail = log.read_text(errors="replace").strip().splitlines()[-1:] or ["no output"]
            if process.poll() is None:
                process.kill()
            fail(f"the daemon did not start: {tail[0]} (its log: {log})", 1)
        time.sleep(0.05)
    out.print(
        f"Daemon {process.pid} serves at {where}; {', '.join(sorted(WARM))} now start warm. "
        f"Log: {log}. `contreact daemon stop` ends it.",
        markup=False,
    )
