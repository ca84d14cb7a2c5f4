"""Which tool a run's driving process is inside now, for `status` to say how long.

A run that sits in a slow tool looks, from outside, like one that hangs. The driving
process notes here when a call of a tool of the run's own starts and ends; its heartbeat
(`registry.Heartbeat`), which writes the run's registry row every second anyway, carries
the note there, and `status` shows it (`in tool slow_tool for 42 s`).

This is live state, like the heartbeat itself, not a record: nothing reads it back to
decide anything, a step that runs again (after a crash, or an `interrupt()` resumed) notes
its call again, and once the process stops beating the note means nothing. It therefore
stays outside the journal, and costs a tool call no database write of its own.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

NAME_CHARS = 200
"""The registry's column for the tool's name holds this many characters."""

_inside: dict[str, tuple[str, float]] = {}
_lock = threading.Lock()


@contextmanager
def in_tool(run_id: str, name: str) -> Iterator[None]:
    """Note that `run_id`'s driver is inside the tool `name` while the block runs."""
    with _lock:
        _inside[run_id] = (name[:NAME_CHARS], time.time())
    try:
        yield
    finally:
        with _lock:
            _inside.pop(run_id, None)


def tool_of(run_id: str) -> tuple[str | None, float | None]:
    """(the tool `run_id`'s driver is in, since when in epoch seconds), or (None, None)."""
    with _lock:
        found = _inside.get(run_id)
    return found if found is not None else (None, None)
