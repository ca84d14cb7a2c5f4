"""Completed cycles: each cycle's reflection, metrics and flags, one row per cycle.

Reflections are kept here rather than in the checkpointed state because every later
prompt needs all of them: a state field holding them would be re-serialized whole into
every checkpoint and make storage per cycle grow with the run's length. A row is written
once, in the transaction that emits the cycle's CYCLE_END, and never changes, so a
prompt built from the rows of cycles before the current one is as reproducible as one
built from the checkpoint itself.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from sqlalchemy import Engine, Integer, bindparam, func, select

from contreact.checkpoints.schema import cycles
from contreact.checkpoints.statements import Prepared, insert_ignore, named
from contreact.checkpoints.transactions import Tx


class Note(NamedTuple):
    """What a later prompt shows of a finished cycle."""

    cycle: int
    opening: str
    """The cycle's first user turn (the task or a chat message in tasked mode)."""
    reflection: str


@dataclass(frozen=True)
class CycleRecord:
    """What a finished cycle left behind."""

    cycle: int
    reflection: str
    opening: str = ""
    metrics: dict[str, Any] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)
    similarity: float | None = None
    advisory: str | None = None


def insert_cycle(conn: Tx, run_id: str, record: CycleRecord) -> bool:
    """Store a finished cycle (idempotent); True when new."""
    return insert_ignore(
        conn,
        cycles,
        {
            "run_id": run_id,
            "cycle": record.cycle,
            "opening": record.opening,
            "reflection": record.reflection,
            "metrics": json.dumps(record.metrics, ensure_ascii=False),
            "flags": json.dumps(record.flags),
            "similarity": record.similarity,
            "advisory": record.advisory,
        },
    )


def _record(row: Any) -> CycleRecord:
    return CycleRecord(
        cycle=row["cycle"],
        reflection=row["reflection"],
        opening=row["opening"] or "",
        metrics=json.loads(row["metrics"]),
        flags=json.loads(row["flags"]),
        similarity=row["similarity"],
        advisory=row["advisory"],
    )


def cycle_records(
    engine: Engine,
    run_id: str,
    *,
    before: int | None = None,
    since: int | None = None,
) -> list[CycleRecord]:
    """A run's finished cycles in order (numbered below `before`, from `since`, if given)."""
    return list(iter_cycle_records(engine, run_id, before=before, since=since))


def last_cycle(engine: Engine, run_id: str) -> int | None:
    """The run's newest finished cycle (None: none yet), read from the index alone."""
    with engine.connect() as conn:
        found = conn.execute(
            select(func.max(cycles.c.cycle)).where(cycles.c.run_id == run_id)
        ).scalar()
    return None if found is None else int(found)


def iter_cycle_records(
    engine: Engine,
    run_id: str,
    *,
    before: int | None = None,
    since: int | None = None,
) -> Iterator[CycleRecord]:
    """`cycle_records`, streamed a few hundred rows at a time (`show` of a long run)."""
    query = select(cycles).where(cycles.c.run_id == run_id).order_by(cycles.c.cycle)
    if before is not None:
        query = query.where(cycles.c.cycle < before)
    if since is not None:
        query = query.where(cycles.c.cycle >= since)
    with engine.connect() as conn:
        for row in conn.execution_options(yield_per=500).execute(query).mappings():
            yield _record(row)


_NOTES = Prepared(
    lambda _: (
        select(cycles.c.cycle, cycles.c.opening, cycles.c.reflection)
        .where(
            cycles.c.run_id == named(cycles, "run_id")["run_id"],
            cycles.c.cycle >= bindparam("since", type_=Integer),
            cycles.c.cycle < bindparam("before", type_=Integer),
        )
        .order_by(cycles.c.cycle)
    )
)
_NEWEST = Prepared(
    lambda _: (
        select(cycles.c.cycle, cycles.c.opening, cycles.c.reflection)
        .where(
            cycles.c.run_id == named(cycles, "run_id")["run_id"],
            cycles.c.cycle < bindparam("before", type_=Integer),
        )
        .order_by(cycles.c.cycle.desc())
        .limit(bindparam("limit", type_=Integer))
        .offset(bindparam("skip", type_=Integer))
    )
)
_COUNT = Prepared(
    lambda _: select(func.count()).where(
        cycles.c.run_id == named(cycles, "run_id")["run_id"],
        cycles.c.cycle < bindparam("before", type_=Integer),
    )
)
_BATCH = 256


class NoteTail(NamedTuple):
    """The newest notes of a scope before some cycle, and how many older ones were not read."""

    older: int
    """How many notes of the scope come before `notes`."""
    notes: tuple[Note, ...]
    """The newest notes, oldest first."""


def _chars(notes: tuple[Note, ...]) -> int:
    return sum(len(n.reflection) for n in notes)


@dataclass
class _Tail:
    upto: int
    """Every note below this cycle is either in `notes` or counted in `older`."""
    older: int
    notes: tuple[Note, ...]
    chars: int
    """The reach kept: the tail holds at least this many reflection characters..."""
    count: int
    """... and at least this many notes (unless it holds the whole scope)."""

    def covers(self, chars: int, count: int, since: int | None) -> bool:
        if self.older == 0:
            return True
        if since is not None and (not self.notes or self.notes[0].cycle > since):
            return False
        return len(self.notes) >= count and _chars(self.notes) >= chars

    def trim(self, since: int | None = None) -> None:
        """Forget the oldest notes the reach does not need (they stay counted in `older`)."""
        notes, size = self.notes, _chars(self.notes)
        drop = 0
        while (
            len(notes) - drop > self.count
            and size - len(notes[drop].reflection) >= self.chars
            and (since is None or notes[drop + 1].cycle <= since)
        ):
            size -= len(notes[drop].reflection)
            drop += 1
        if drop:
            self.notes, self.older = notes[drop:], self.older + drop


_tails: OrderedDict[tuple[Engine, str], _Tail] = OrderedDict()
_tails_lock = threading.Lock()
_NOTED_SCOPES = 256


def recent_notes(
    engine: Engine,
    run_id: str,
    *,
    before: int,
    chars: int = 0,
    count: int = 0,
    since: int | None = None,
) -> NoteTail:
    """The newest notes of the finished cycles numbered below `before`, oldest first.

    A prompt shows only the newest notes that fit its window and the similarity monitor
    compares a bounded number, so a step never reads the whole past: the tail returned
    holds at least `count` notes and `chars` characters of reflections (and reaches back
    to cycle `since`, if given), or every note there is; older notes are only counted.
    Rows of finished cycles never change, so each scope's tail is kept in memory and only
    cycles after the newest one known are read: a step's cost does not grow with the run.

    Args:
        engine: The database.
        run_id: The scope (run id and lineage) whose cycles are read.
        before: Only notes of cycles below this one.
        chars: Reflection characters the tail must hold at least.
        count: Notes the tail must hold at least.
        since: A cycle the tail must reach back to.

    Returns:
        The tail, possibly longer than asked (never shorter, unless the scope has fewer).
    """
    key = (engine, run_id)
    with _tails_lock:
        known = _tails.get(key)
    if known is not None and before < known.upto:
        # A step replayed at a fork point: a prefix of what is known, if it reaches.
        if known.older == 0 or (known.notes and known.notes[0].cycle < before):
            notes = tuple(n for n in known.notes if n.cycle < before)
            part = _Tail(before, known.older, notes, 0, 0)
            if part.covers(chars, count, since):
                return NoteTail(part.older, part.notes)
        loaded = _load(engine, run_id, before, chars, count, since)
        return NoteTail(loaded.older, loaded.notes)  # the newer tail stays cached
    tail: _Tail | None = None
    if known is not None:
        reach = (max(chars, known.chars), max(count, known.count))
        tail = _Tail(known.upto, known.older, known.notes, *reach)
        if before > tail.upto:
            rows = _NOTES.query(engine, {"run_id": run_id, "since": tail.upto, "before": before})
            if rows:
                tail.notes += tuple(Note(int(c), str(o or ""), str(r)) for c, o, r in rows)
                # Known up to the newest row read: a cycle not finished yet is asked for again.
                tail.upto = tail.notes[-1].cycle + 1
                tail.trim(since)
        if not tail.covers(chars, count, since):
            tail = _load(engine, run_id, before, *reach, since)
    else:
        tail = _load(engine, run_id, before, chars, count, since)
    with _tails_lock:
        _tails[key] = tail
        _tails.move_to_end(key)
        while len(_tails) > _NOTED_SCOPES:
            _tails.popitem(last=False)
    return NoteTail(tail.older, tail.notes)


def _load(
    engine: Engine, run_id: str, before: int, chars: int, count: int, since: int | None
) -> _Tail:
    """Read the newest notes below `before`, a batch at a time, until the reach is covered."""
    notes: tuple[Note, ...] = ()
    bound = before
    while True:
        rows = _NEWEST.query(
            engine, {"run_id": run_id, "before": bound, "limit": _BATCH, "skip": 0}
        )
        notes = tuple(Note(int(c), str(o or ""), str(r)) for c, o, r in reversed(rows)) + notes
        tail = _Tail(before, 1 if len(rows) == _BATCH else 0, notes, chars, count)
        if len(rows) < _BATCH or tail.covers(chars, count, since):
            break
        bound = notes[0].cycle
    if tail.older:
        tail.older = int(_COUNT.query(engine, {"run_id": run_id, "before": notes[0].cycle})[0][0])
    tail.upto = notes[-1].cycle + 1 if notes else 1
    tail.trim(since)
    return tail
