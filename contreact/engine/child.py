"""A run's own process: the engine's named entry for a run a batch or a worker drives.

Every run of a batch or a study is driven in a process of its own, so a crash takes one run
down, the cores are used, and a queued run's lease token goes with that process's
connections (`checkpoints.fencing`). That process enters here, not through the command
line: services never run the CLI. It starts or resumes one run, writes plain lines to its
log (the reflections, operator exchanges and the outcome), ends every error in one line,
and exits with the run's code (0 done, 1 failed, 2 bad input, 3 paused).

It dies with the process that asked for it: a process it started itself gets the kernel's
parent-death signal; one forked from the fork server (`studies.fork_server`), whose parent
is the server, watches the asking process instead.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from contreact.checkpoints.engines import dispose_engines, fault_of
from contreact.checkpoints.registry import RunRecord
from contreact.checkpoints.statements import compile_all
from contreact.checkpoints.storage import Storage
from contreact.checkpoints.storage_faults import StorageFault
from contreact.config.files import load_config
from contreact.engine.outcome import RunOutcome
from contreact.engine.runner import resume_run, start_run
from contreact.errors import LINE_LIMIT, detail, known_error
from contreact.graph.state import AgentState
from contreact.ollama.hosts import default_ollama_host
from contreact.text.messages import cut
from contreact.text.terminal import visible

PARENT_ENV = "CONTREACT_PARENT_PID"
"""The process a run process must not outlive (a batch, a worker)."""


@dataclass(frozen=True)
class RunRequest:
    """What a run's own process is asked to do: start a run from a config, or resume one."""

    run_id: str
    storage: Storage
    config_file: Path | None = None
    """Start the run from this config; None: resume `run_id`."""
    host: str | None = None
    """Resume against this Ollama host instead of the run's own."""
    cycles: int | None = None
    """Resume to this many cycles in all, extending the run once it completes (a batch
    whose `cycles` was raised); None: to the run's own end."""


class LogLines:
    """A run's progress as plain lines in its log: reflections, operator exchanges, outcome."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.cycle = 0
        self.reflection = ""

    def _line(self, text: str) -> None:
        self.stream.write(visible(text) + "\n")
        self.stream.flush()

    def started(self, record: RunRecord, state: AgentState | None, resumed: bool) -> None:
        """Say which run starts or resumes, and where."""
        self.cycle = state.cycle if state else (record.fork_cycle or 0) + 1
        verb = "resuming" if resumed else "starting"
        where = f" at cycle {self.cycle}" if resumed else ""
        self._line(f"{verb} run {record.run_id}{where} · model {record.model}")

    def node_started(self, node: str) -> None:
        """Nothing: a log has no live line."""

    def update(self, node: str, update: dict[str, Any]) -> None:
        """Write each cycle's reflection as it closes."""
        if node == "parse" and update.get("outcome") == "final":
            self.reflection = str(update.get("final_text", ""))
        elif node == "reflect":
            text = self.reflection.strip() or "(empty reflection)"
            self._line(f"cycle {self.cycle} reflection: {text}")
            self.cycle = int(update.get("cycle", self.cycle))
            self.reflection = ""

    def operator(self, message: str, reply: str | None, policy: str) -> None:
        """Write the agent's message and the reply (or that it waits)."""
        self._line(f"  agent → operator: {cut(message, 200)}")
        if reply is None:
            self._line("  (waiting in the queue: answer with `contreact reply`)")
        else:
            self._line(f"  operator ({policy}) → agent: {cut(reply, 200)}")

    def finished(self, outcome: RunOutcome) -> None:
        """Write how the drive ended (a failure's line comes from `drive_request`)."""
        if outcome.status != "failed":
            tail = f": {outcome.reason}" if outcome.reason else ""
            self._line(f"run {outcome.run_id} {outcome.status}{tail}")


def _say(line: str) -> None:
    sys.stderr.write(visible(cut(f"contreact: {line}", LINE_LIMIT)) + "\n")
    sys.stderr.flush()


def drive_request(request: RunRequest) -> int:
    """Start or resume the run as asked; the exit code (every error said in one line)."""
    progress = LogLines(sys.stdout)
    try:
        try:
            if request.config_file is not None:
                config = load_config(request.config_file)
                outcome = start_run(config, request.storage, progress=progress)
            else:
                overrides = {"host": request.host} if request.host else None
                outcome = resume_run(
                    request.run_id,
                    request.storage,
                    overrides=overrides,
                    progress=progress,
                    cycles=request.cycles,
                )
        finally:
            dispose_engines()
    except KeyboardInterrupt:
        _say("interrupted")
        return 130
    except Exception as exc:  # noqa: BLE001 - every error ends as one line and a code
        known = known_error(exc, lambda: request.storage.shown)
        if known is not None:
            _say(known[0])
            return known[1]
        fault = exc if isinstance(exc, StorageFault) else fault_of(request.storage, exc)
        if fault is not None:
            _say(str(fault))
            return 1
        _say(f"unexpected error: {detail(exc)}")
        return 1
    line = outcome.failure_line()
    if line is not None:
        _say(line)
    return outcome.exit_code


def _stop_on_sigterm(signum: int, frame: object) -> None:
    # A batch stops its runs with SIGTERM: end the way Ctrl-C does, leaving the run
    # resumable and marked interrupted, not half-written.
    raise KeyboardInterrupt


def die_with_parent() -> None:
    """Be killed when the process in `CONTREACT_PARENT_PID` dies, never orphaned.

    A process it started itself gets the kernel's parent-death signal (Linux). A process
    forked by the fork server has the server as its parent, and the server lives as long
    as any process it forked: this one watches the asking process itself instead (a pidfd
    becomes readable when that process exits).
    """
    parent = os.environ.get(PARENT_ENV)
    if not parent or not sys.platform.startswith("linux"):
        return
    if os.getppid() != int(parent):
        _watch(int(parent))
        return
    import ctypes

    pr_set_pdeathsig = 1
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)
    except OSError:
        return
    if os.getppid() != int(parent):
        os._exit(1)  # the parent died before the signal was armed


def _watch(pid: int) -> None:
    """Kill this process (SIGKILL, as the parent-death signal would) when `pid` exits."""
    import select
    import threading

    try:
        handle = os.pidfd_open(pid)
    except ProcessLookupError:
        os._exit(1)  # the parent died before this process started watching it

    def wait() -> None:
        select.select([handle], [], [])
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=wait, name="parent-watch", daemon=True).start()


def run_process_main(request: RunRequest) -> int:
    """The whole life of a run's own process, once its environment and streams are set."""
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    die_with_parent()
    logging.basicConfig(level=logging.ERROR, format="%(message)s")
    # A run whose traces cannot reach their collector says so, once.
    logging.getLogger("contreact.tracing").setLevel(logging.WARNING)
    # Credentials in OLLAMA_HOST reach this process's requests to that host.
    if "@" in os.environ.get("OLLAMA_HOST", ""):
        default_ollama_host()
    return drive_request(request)


def main(argv: list[str] | None = None) -> None:
    """`python -m contreact.engine.child RUN`: resume RUN in a process of this one's own.

    For a face that starts a run's process without a fork server (the console, after an
    operator's reply). The storage is the environment's (`CONTREACT_DB_URL`, else the
    SQLite file in `CONTREACT_HOME`), so no password shows in `ps`.
    """
    from contreact.checkpoints.storage import resolve_storage

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        _say("usage: python -m contreact.engine.child RUN")
        raise SystemExit(2)
    storage = resolve_storage(None, None)
    raise SystemExit(run_process_main(RunRequest(args[0], storage)))


# The fork server imports this module once: the statements compiled here are in every run
# process it forks, each of which would otherwise compile them again on first use.
compile_all()


if __name__ == "__main__":
    main()
