"""The event log: idempotent keyed rows in the database, mirrored to `logs/<run_id>.jsonl`.

Every event carries a key built from checkpointed counters (cycle, step, call index), so
a node that re-runs after a crash re-inserts nothing. The database is the source of truth;
the JSONL file is appended after each commit for `tail -f`, and rebuilt from the database
whenever a run starts or resumes, which closes the window between a commit and its append.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from sqlalchemy import Connection, Engine, func, select

from checkpoints.db import Storage, events, insert_ignore

EventType = Literal[
    "RUN_START",
    "HOST_CHANGE",
    "CYCLE_START",
    "LLM_INVOCATION",
    "TOOL_CALL",
    "OPERATOR_MESSAGE",
    "CONTEXT_TRIM",
    "SIMILARITY",
    "CYCLE_END",
    "ERROR",
    "RUN_END",
]


@dataclass(frozen=True)
class Event:
    """One event before it is stored; `key` must be unique within the run."""

    event_type: EventType
    cycle: int
    key: str
    payload: dict[str, Any] = field(default_factory=dict)


def utc_now() -> str:
    """The current time as ISO-8601 UTC."""
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def as_line(run_id: str, row: dict[str, Any]) -> dict[str, Any]:
    """The public JSONL shape of a stored event row."""
    payload = row["payload"]
    return {
        "timestamp": row["timestamp"],
        "run_id": run_id,
        "cycle_number": row["cycle"],
        "event_type": row["event_type"],
        "payload": json.loads(payload) if isinstance(payload, str) else payload,
    }


def insert_events(conn: Connection, run_id: str, batch: Iterable[Event]) -> list[dict[str, Any]]:
    """Insert events inside the caller's transaction; returns the JSONL lines that were new."""
    fresh: list[dict[str, Any]] = []
    for ev in batch:
        row = {
            "run_id": run_id,
            "key": ev.key,
            "cycle": ev.cycle,
            "event_type": ev.event_type,
            "timestamp": utc_now(),
            "payload": json.dumps(ev.payload, ensure_ascii=False, default=str),
        }
        if insert_ignore(conn, events, row):
            fresh.append(as_line(run_id, row))
    return fresh


def log_path(storage: Storage, run_id: str) -> Path:
    """Where a run's JSONL log lives."""
    return storage.logs_dir / f"{run_id}.jsonl"


def append_lines(storage: Storage, run_id: str, lines: Sequence[dict[str, Any]]) -> None:
    """Append committed events to the run's JSONL mirror."""
    if not lines:
        return
    path = log_path(storage, run_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as fh:
        for line in lines:
            fh.write(json.dumps(line, ensure_ascii=False) + "\n")


def read_events(
    engine: Engine, run_id: str, *, upto_cycle: int | None = None
) -> list[dict[str, Any]]:
    """A run's events in the order they were first committed, as JSONL-shaped dicts."""
    query = select(events).where(events.c.run_id == run_id).order_by(events.c.id)
    if upto_cycle is not None:
        query = query.where(events.c.cycle <= upto_cycle)
    with engine.connect() as conn:
        rows = conn.execute(query).mappings().all()
    return [as_line(run_id, dict(r)) for r in rows]


def rebuild_log(engine: Engine, storage: Storage, run_id: str) -> Path:
    """Rewrite the run's JSONL file from the database (atomic replace)."""
    path = log_path(storage, run_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".jsonl.tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        for line in read_events(engine, run_id):
            fh.write(json.dumps(line, ensure_ascii=False) + "\n")
    os.replace(tmp, path)
    return path


def sync_log(engine: Engine, storage: Storage, run_id: str) -> Path:
    """Make the run's JSONL file hold exactly the database's events, in order.

    Lines are only ever appended after their events commit, so after a crash the file is
    the database's events minus at most a tail: append that tail (cheap, however long
    the run). Anything else (a file edited or lost) is rewritten from the database.
    """
    path = log_path(storage, run_id)
    if not path.exists():
        return rebuild_log(engine, storage, run_id)
    with path.open("rb") as fh:
        have = sum(1 for _ in fh)
    want = count_events(engine, run_id)
    if have > want or not _last_line_matches(engine, run_id, path, have):
        return rebuild_log(engine, storage, run_id)
    if have < want:
        query = select(events).where(events.c.run_id == run_id).order_by(events.c.id).offset(have)
        with engine.connect() as conn:
            missing = [as_line(run_id, dict(r)) for r in conn.execute(query).mappings()]
        append_lines(storage, run_id, missing)
    return path


def _last_line_matches(engine: Engine, run_id: str, path: Path, count: int) -> bool:
    """Whether the file's last line is the database's event number `count`."""
    if count == 0:
        return True
    with path.open("rb") as fh:
        fh.seek(max(0, path.stat().st_size - 1_000_000))
        tail = fh.read().splitlines()
    if not tail:
        return False
    try:
        last = json.loads(tail[-1])
    except ValueError:
        return False
    query = (
        select(events)
        .where(events.c.run_id == run_id)
        .order_by(events.c.id)
        .offset(count - 1)
        .limit(1)
    )
    with engine.connect() as conn:
        row = conn.execute(query).mappings().first()
    return row is not None and as_line(run_id, dict(row)) == last


def count_events(
    engine: Engine, run_id: str, *, key_prefix: str | None = None, event_type: str | None = None
) -> int:
    """How many of a run's events have keys starting with `key_prefix` / are of `event_type`."""
    query = select(func.count()).select_from(events).where(events.c.run_id == run_id)
    if key_prefix is not None:
        query = query.where(events.c.key.startswith(key_prefix, autoescape=True))
    if event_type is not None:
        query = query.where(events.c.event_type == event_type)
    with engine.connect() as conn:
        return int(conn.execute(query).scalar_one())
