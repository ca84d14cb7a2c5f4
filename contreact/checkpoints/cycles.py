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
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from sqlalchemy import Engine, Integer, bindparam, select

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


def cycle_records(engine: Engine, run_id: str, *, before: int | None = None) -> list[CycleRecord]:
    """A run's finished cycles in order (only those numbered below `before`, if given)."""
    query = select(cycles).where(cycles.c.run_id == run_id).order_by(cycles.c.cycle)
    if before is not None:
        query = query.where(cycles.c.cycle < before)
    with engine.connect() as conn:
        return [_record(r) for r in conn.execute(query).mappings()]


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

_notes: OrderedDict[tuple[Engine, str], tuple[int, tuple[Note, ...]]] = OrderedDict()
_notes_lock = threading.Lock()
_NOTED_SCOPES = 256


def earlier_notes(engine: Engine, run_id: str, *, before: int) -> tuple[Note, ...]:
    """The notes of every finished cycle numbered below `before`, in order.

    Every step of a cycle asks, and a long run has hundreds: rows of finished cycles never
    change, so each scope's notes are kept in memory and only cycles after the newest one
    known are read (a fork point's earlier `before` is a prefix of what is known).
    """
    with _notes_lock:
        known = _notes.get((engine, run_id))
    upto, notes = known if known is not None else (1, ())
    if before <= upto:
        return notes if before == upto else tuple(n for n in notes if n.cycle < before)
    rows = _NOTES.query(engine, {"run_id": run_id, "since": upto, "before": before})
    notes += tuple(Note(int(c), str(o or ""), str(r)) for c, o, r in rows)
    # Known up to the newest row read: a cycle not finished yet is asked for again.
    upto = notes[-1].cycle + 1 if notes else upto
    with _notes_lock:
        _notes[(engine, run_id)] = (upto, notes)
        _notes.move_to_end((engine, run_id))
        while len(_notes) > _NOTED_SCOPES:
            _notes.popitem(last=False)
    return notes
