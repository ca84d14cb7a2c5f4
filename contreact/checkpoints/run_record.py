"""A row of the run registry and what it says about the run, without a database library.

`contreact list` and `status` read the registry in a few tenths of a second, before any
database layer is imported (`checkpoints.peek`); the record, its shown status and the
registry's errors live here so both the fast read and `checkpoints.registry` share them.
"""

from __future__ import annotations

import json
import os
import re
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from contreact.text.messages import cut

RunStatus = Literal["running", "paused", "completed", "failed"]
ShownStatus = Literal["running", "interrupted", "paused", "completed", "failed"]
"""A status as `list` and `status` show it: a `running` run nobody drives is `interrupted`."""

HEARTBEAT_S = 1.0
"""How often a driving process refreshes its run's heartbeat."""
STALE_AFTER_S = 3.0
"""A heartbeat this old means the driving process is gone (killed, crashed, machine down)."""
RUN_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")


def check_run_id(run_id: str) -> str:
    """Validate a run id (it names files and appears in URLs)."""
    if not RUN_ID_PATTERN.match(run_id):
        raise ValueError(
            f"run id {cut(run_id)!r} must start with a letter or digit and contain only "
            "letters, digits, '.', '_' or '-' (at most 200 characters)"
        )
    return run_id


class RunExistsError(Exception):
    """`run` was asked to create a run id that is already registered."""


class RunNotFoundError(Exception):
    """No run is registered under that id."""


@dataclass(frozen=True)
class RunRecord:
    """One row of the registry."""

    run_id: str
    thread_id: str
    status: RunStatus
    model: str
    host: str
    config: dict[str, Any]
    reason: str
    parent_run_id: str | None
    fork_cycle: int | None
    batch: str | None
    pid: int | None
    created_at: str
    updated_at: str
    origin: str = "cli"
    """Where the run was started: `cli` (run, fork, batch, pei) or `studio`."""
    heartbeat: float | None = None
    driver_host: str | None = None
    """The machine whose process beats for the run (its pid is only meaningful there)."""
    in_tool: str | None = None
    """The tool of the run's own its driver is inside (as of the last beat), if any."""
    in_tool_since: float | None = None
    """Since when (epoch seconds) it is inside `in_tool`."""

    def tool_seconds(self, now: float | None = None) -> tuple[str, float] | None:
        """(the tool the driver was inside at its last beat, seconds it has run by `now`).

        Meaningful while the run is `driven`: a driver that stopped left its last note.
        """
        if self.in_tool is None or self.in_tool_since is None:
            return None
        return self.in_tool, max(0.0, (now or time.time()) - self.in_tool_since)

    @property
    def shown_status(self) -> ShownStatus:
        """`interrupted` for a `running` run whose driver stopped beating, else the status."""
        # Studio's server drives its runs itself and does not beat: its status stands.
        if self.status == "running" and self.origin != "studio" and not self.driven:
            return "interrupted"
        return self.status

    @property
    def driven(self) -> bool:
        """Whether a process is driving this run right now (its heartbeat is fresh).

        Runs registered before heartbeats existed fall back to the pid check.
        """
        if self.heartbeat is None:
            return self.process_alive
        if self.driver_host == socket.gethostname() and not self.process_alive:
            return False  # killed on this machine: no need to wait for the beat to go stale
        return time.time() - self.heartbeat < STALE_AFTER_S

    @property
    def process_alive(self) -> bool:
        """Whether the process that last drove this run still runs on this machine.

        A zombie, or a recycled pid now running something else, does not count.
        """
        if self.pid is None:
            return False
        proc = Path(f"/proc/{self.pid}")
        if proc.exists():
            try:
                state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
                command = (proc / "cmdline").read_bytes()
            except (OSError, IndexError):
                return False
            return state != "Z" and b"contreact" in command
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


def record_from_row(row: dict[str, Any]) -> RunRecord:
    """A registry row (column name -> value, `config` as stored JSON text) as a record."""
    return RunRecord(**{**row, "config": json.loads(row["config"])})
