"""The event store: a run's events as idempotent keyed rows, written and read.

Every event carries a key built from checkpointed counters (cycle, step, call index), so a
node that re-runs after a crash re-inserts nothing. The database is the source of truth;
the JSONL file beside it (`event_mirror`) only mirrors it. What each event holds is the
schema's (`event_schema`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, bindparam, func, select

from contreact.checkpoints.event_schema import Event, utc_now
from contreact.checkpoints.schema import events
from contreact.checkpoints.statements import Prepared, insert_ignore, named
from contreact.checkpoints.transactions import Tx


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


def event_row(run_id: str, ev: Event) -> dict[str, Any]:
    """The `events` row that stores `ev`, stamped now."""
    return {
        "run_id": run_id,
        "key": ev.key,
        "cycle": ev.cycle,
        "event_type": ev.event_type,
        "timestamp": utc_now(),
        "payload": json.dumps(ev.payload, ensure_ascii=False, default=str),
    }


def insert_events(conn: Tx, run_id: str, batch: Iterable[Event]) -> list[str]:
    """Insert events inside the caller's transaction; returns the JSONL lines that were new."""
    fresh: list[str] = []
    for ev in batch:
        row = event_row(run_id, ev)
        if insert_ignore(conn, events, row):
            fresh.append(line_text(run_id, row))
    return fresh


def line_text(run_id: str, row: dict[str, Any]) -> str:
    """A stored event row's JSONL line, its payload text spliced in as it was stored.

    The same text as `json.dumps(as_line(run_id, row), ensure_ascii=False)` for a payload
    that `json.dumps(payload, ensure_ascii=False)` wrote. Every event is appended as it
    commits: decoding the payload just encoded, to encode it again inside the line, cost
    more than the insert.
    """
    return (
        f'{{"timestamp": {json.dumps(row["timestamp"])}, '
        f'"run_id": {json.dumps(run_id, ensure_ascii=False)}, '
        f'"cycle_number": {int(row["cycle"])}, '
        f'"event_type": {json.dumps(row["event_type"])}, '
        f'"payload": {row["payload"]}}}'
    )


def read_events(
    engine: Engine, run_id: str, *, upto_cycle: int | None = None
) -> list[dict[str, Any]]:
    """A run's events in the order they were first committed, as JSONL-shaped dicts."""
    return list(iter_events(engine, run_id, upto_cycle=upto_cycle))


STREAMED_ROWS = 500
"""Rows fetched at a time when a whole log is streamed (`iter_events`)."""


def iter_events(
    engine: Engine, run_id: str, *, upto_cycle: int | None = None
) -> Iterator[dict[str, Any]]:
    """`read_events`, streamed: a 10,000-cycle log is written out without being held whole."""
    query = select(events).where(events.c.run_id == run_id).order_by(events.c.id)
    if upto_cycle is not None:
        query = query.where(events.c.cycle <= upto_cycle)
    with engine.connect() as conn:
        rows = conn.execution_options(yield_per=STREAMED_ROWS).execute(query).mappings()
        for row in rows:
            yield as_line(run_id, dict(row))


def count_events(
    engine: Engine,
    run_id: str,
    *,
    key_prefix: str | None = None,
    event_type: str | None = None,
    cycle: int | None = None,
    limit: int | None = None,
) -> int:
    """How many of a run's events have keys starting with `key_prefix` / are of `event_type`.

    With `cycle`, only that cycle's events are read (through the (run, cycle) index).
    With `limit`, counting stops there (the answer is at most `limit`).
    """
    found = select(events.c.id).where(events.c.run_id == run_id)
    if cycle is not None:
        found = found.where(events.c.cycle == cycle)
    if key_prefix is not None:
        found = found.where(events.c.key.startswith(key_prefix, autoescape=True))
    if event_type is not None:
        found = found.where(events.c.event_type == event_type)
    if limit is not None:
        found = found.limit(limit)
    query = select(func.count()).select_from(found.subquery())
    with engine.connect() as conn:
        return int(conn.execute(query).scalar_one())


def numbered(engine: Engine, run_id: str, key_of: Callable[[int], str]) -> int:
    """How many of a run's numbered run-level events there are (`key_of(0)`, `key_of(1)`...).

    They are numbered without gaps (each is written with the count of those before it), so
    the count is the first number whose key is absent: found by doubling and halving, in
    O(log n) look-ups of the (run, key) index. Counting them by type would read every event
    of the run at each `resume`.
    """
    query = select(events.c.key).where(events.c.run_id == run_id, events.c.key == bindparam("k"))
    with engine.connect() as conn:

        def present(n: int) -> bool:
            return conn.execute(query, {"k": key_of(n)}).first() is not None

        if not present(0):
            return 0
        low, high = 0, 1  # present(low), and high to find: the first absent
        while present(high):
            low, high = high, high * 2
        while high - low > 1:
            middle = (low + high) // 2
            low, high = (middle, high) if present(middle) else (low, middle)
        return high


def payload_of(engine: Engine, run_id: str, key: str) -> dict[str, Any] | None:
    """The payload of a run's event `key` (a run-level one, e.g. EXTENSIONS), or None."""
    query = select(events.c.payload).where(events.c.run_id == run_id, events.c.key == key)
    with engine.connect() as conn:
        raw = conn.execute(query).scalar_one_or_none()
    if raw is None:
        return None
    found = json.loads(raw) if isinstance(raw, str) else raw
    return found if isinstance(found, dict) else None


_EVENT = named(events, "run_id", "key")
_LOGGED_AT = Prepared(
    lambda _: select(events.c.timestamp).where(
        events.c.run_id == _EVENT["run_id"], events.c.key == _EVENT["key"]
    )
)


def seconds_since(conn: Tx, run_id: str, key: str) -> float | None:
    """Seconds since the event `key` was logged (how long the operator took to answer)."""
    row = _LOGGED_AT.first(conn, {"run_id": run_id, "key": key})
    if row is None:
        return None
    return seconds_from(str(row[0]))


def seconds_from(stamp: str) -> float:
    """Seconds from the ISO-8601 time `stamp` (as events are stamped) until now."""
    then = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    return round((datetime.now(then.tzinfo) - then).total_seconds(), 3)
