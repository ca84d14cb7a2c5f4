"""The `logs/<run_id>.jsonl` mirror of a run's event log, for `tail -f` and plain tools.

The database is the source of truth. Lines are appended after each commit, and the file is
brought level with the database whenever a run starts or resumes, which closes the window
between a commit and its append; a deleted or damaged file is rebuilt from the database.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, select

from contreact.checkpoints.event_store import as_line, iter_events
from contreact.checkpoints.private_files import open_private
from contreact.checkpoints.schema import events
from contreact.checkpoints.storage import Storage


def log_path(storage: Storage, run_id: str) -> Path:
    """Where a run's JSONL log lives."""
    return storage.logs_dir / f"{run_id}.jsonl"


def append_lines(storage: Storage, run_id: str, lines: Sequence[dict[str, Any]]) -> None:
    """Append events (JSONL-shaped dicts) to the run's JSONL mirror."""
    if not lines:
        return
    with open_private(log_path(storage, run_id), "a") as fh:
        for line in lines:
            fh.write(json.dumps(line, ensure_ascii=False) + "\n")


committed_watch: ContextVar[Callable[[str, Sequence[str]], None] | None] = ContextVar(
    "contreact_committed_watch", default=None
)
"""Told of the events each commit added (scope, JSONL lines), in the context that set it.

Only new events reach the mirror, so a watcher sees every effect once: a step replayed
from the journal after a resume commits nothing new. A run's traces are made from them.
"""


def mirror_lines(engine: Engine, storage: Storage, run_id: str, lines: Sequence[str]) -> None:
    """Append committed events (`line_text`) to the JSONL mirror; a deleted one is rebuilt.

    Appending to a deleted log would start a new file holding only the newest events;
    rebuilt from the database instead, it holds them all (these included, committed).
    The file is opened without `O_CREAT`, so finding it gone costs nothing extra.
    """
    if not lines:
        return
    watch = committed_watch.get()
    if watch is not None:
        watch(run_id, lines)
    try:
        fd = os.open(log_path(storage, run_id), os.O_WRONLY | os.O_APPEND)
    except FileNotFoundError:
        rebuild_log(engine, storage, run_id)
        return
    try:
        data = ("\n".join(lines) + "\n").encode("utf-8")
        # One write of the whole batch: O_APPEND puts it at the end in one piece.
        while data:
            data = data[os.write(fd, data) :]
    finally:
        os.close(fd)


def rebuild_log(engine: Engine, storage: Storage, run_id: str) -> Path:
    """Rewrite the run's JSONL file from the database (atomic replace)."""
    path = log_path(storage, run_id)
    tmp = path.with_suffix(".jsonl.tmp")
    with open_private(tmp, "w") as fh:
        for line in iter_events(engine, run_id):
            fh.write(json.dumps(line, ensure_ascii=False) + "\n")
    os.replace(tmp, path)
    return path


def sync_log(engine: Engine, storage: Storage, run_id: str) -> Path:
    """Make the run's JSONL file hold the database's events, in order.

    Lines are only ever appended after their events commit, so after a crash the file is
    the database's events minus at most a tail: its last line is found in the database
    (by its cycle, through the (run, cycle) index) and the events after it are appended.
    That reads the file's last line and the missing events, never the whole log: a resume
    late in a long run costs what an early one does. A last line the database does not hold
    (a file edited, foreign or truncated mid-line) has the file rewritten from the database.
    """
    path = log_path(storage, run_id)
    if not path.exists():
        return rebuild_log(engine, storage, run_id)
    last = _last_line(path)
    if last is None:
        return rebuild_log(engine, storage, run_id)
    after = _event_id_of(engine, run_id, last) if last else 0
    if after is None:
        return rebuild_log(engine, storage, run_id)
    query = (
        select(events).where(events.c.run_id == run_id, events.c.id > after).order_by(events.c.id)
    )
    with engine.connect() as conn:
        missing = [as_line(run_id, dict(r)) for r in conn.execute(query).mappings()]
    if missing:
        append_lines(storage, run_id, missing)
    return path


TAIL_BYTES = 1_000_000
"""How much of the end of a log file is read to find its last line (one line is a few
kilobytes; a model answer of hundreds of kilobytes has the file rebuilt instead)."""


def _last_line(path: Path) -> dict[str, Any] | None:
    """The file's last line as JSON, `{}` for an empty file, None if it cannot be read."""
    size = path.stat().st_size
    if size == 0:
        return {}
    with path.open("rb") as fh:
        fh.seek(max(0, size - TAIL_BYTES))
        tail = fh.read()
    if not tail.endswith(b"\n"):
        return None  # cut mid-line
    lines = tail.splitlines()
    if not lines or (size > TAIL_BYTES and len(lines) < 2):
        return None
    try:
        line = json.loads(lines[-1])
    except ValueError:
        return None
    return line if isinstance(line, dict) and line else None


def _event_id_of(engine: Engine, run_id: str, line: dict[str, Any]) -> int | None:
    """The id of the run's event that `line` shows, or None if the database has none."""
    cycle = line.get("cycle_number")
    if not isinstance(cycle, int) or isinstance(cycle, bool):
        return None
    query = (
        select(events)
        .where(
            events.c.run_id == run_id,
            events.c.cycle == cycle,
            events.c.timestamp == str(line.get("timestamp")),
        )
        .order_by(events.c.id)
    )
    with engine.connect() as conn:
        for row in conn.execute(query).mappings():
            if as_line(run_id, dict(row)) == line:
                return int(row["id"])
    return None
