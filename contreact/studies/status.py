"""Following a batch's runs from the database: cycle, step, status, tokens/s and ETA.

A batch's runs are child processes (or processes on another machine, for
`contreact batch --status NAME`), so their progress is read where they write it: the
event log and the run registry. Each `poll` reads only the events committed since the
last one, so following a long batch stays cheap, and reports the cycles that ended since
(the ones that had ended before the first poll are history, not news).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, func, select

from contreact.checkpoints.registry import list_runs
from contreact.checkpoints.schema import batch_runs, events, leases, runs
from contreact.ollama.server_numbers import number

FINAL = frozenset({"completed", "failed", "interrupted", "paused"})
SETTLED = frozenset({"completed", "failed", "paused"})
"""Statuses that stay as they are until a person acts (an interrupted run is resumed by a
worker's sweep or a person; a queued or running one moves by itself)."""
NOTED = ("INTERVENTION", "HOOK", "ERROR")
"""Events a person following a run is told of as they happen: an intervention acted, a
hook vetoed or rewrote a tool call, a tool of the run's own was contained (`CONTAINED`)."""
CONTAINED = frozenset({"tool_escaped", "tool_timeout"})
"""The ERROR kinds that are noted: a tool raised past `Exception` or ran past its timeout
(the run went on; other errors are the run's record, or its failure, not news)."""


def noted(event_type: str, payload: dict[str, Any]) -> bool:
    """Whether a person following the run is told of this event (`NOTED`, `CONTAINED`)."""
    return event_type != "ERROR" or payload.get("kind") in CONTAINED


def _time(stamp: str) -> float:
    return datetime.fromisoformat(stamp).timestamp()


@dataclass
class RunView:
    """Where one run of the batch stands."""

    run_id: str
    model: str
    last_cycle: int
    """The cycles the run is to reach."""
    cycle: int = 0
    """The cycle running now (or the last one started)."""
    done: int = 0
    """The last cycle that ended."""
    step: int = 0
    """Model calls made in the current cycle."""
    status: str = "queued"
    """The registry's status as shown (`queued`: not started yet)."""
    host: str = ""
    """The Ollama host the run talks to (empty until it starts)."""
    driver: str = ""
    """The machine and process driving it (`host:pid`) while one does."""
    worker: str = ""
    """The queue's worker holding its lease (`machine:pid`), for a study on the queue."""
    tokens_per_s: float | None = None
    """Output tokens per second of the last model call."""
    cycle_seconds: list[float] = field(default_factory=list)
    cycle_started: float | None = None

    @property
    def cycle_shown(self) -> str:
        """The cycle column: `in 3/4` while a cycle runs, `4/4 ✓` once all are done.

        Otherwise the cycles done (`2/4`: queued, paused, failed or interrupted).
        """
        if self.status == "running":
            # Between two cycles the next one is as good as begun.
            current = self.cycle if self.cycle > self.done else self.done + 1
            return f"in {min(max(current, 1), self.last_cycle)}/{self.last_cycle}"
        if self.status == "completed" and self.done >= self.last_cycle:
            return f"{self.done}/{self.last_cycle} ✓"
        return f"{self.done}/{self.last_cycle}"

    def eta_seconds(self, now: float) -> float | None:
        """Seconds until the run's last cycle ends, from its mean cycle time so far."""
        if self.status in FINAL or self.done >= self.last_cycle:
            return 0.0 if self.done >= self.last_cycle else None
        if not self.cycle_seconds:
            return None
        mean = sum(self.cycle_seconds) / len(self.cycle_seconds)
        in_flight = now - self.cycle_started if self.cycle_started and self.cycle > self.done else 0
        return max(0.0, mean * (self.last_cycle - self.done) - in_flight)


@dataclass(frozen=True)
class RunNote:
    """An event a person following the run is told of (`NOTED`)."""

    run_id: str
    cycle: int
    event_type: str
    payload: dict[str, Any]


class EventTail:
    """One run's `NOTED` events committed after it was opened, read as they come."""

    def __init__(self, engine: Engine, run_id: str) -> None:
        self.engine, self.run_id = engine, run_id
        with engine.connect() as conn:
            newest = conn.execute(
                select(func.max(events.c.id)).where(events.c.run_id == run_id)
            ).scalar()
        self._after = int(newest or 0)

    def read(self) -> list[RunNote]:
        """The noted events committed since the last read."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(events.c.id, events.c.cycle, events.c.event_type, events.c.payload)
                .where(
                    events.c.run_id == self.run_id,
                    events.c.id > self._after,
                    events.c.event_type.in_(NOTED),
                )
                .order_by(events.c.id)
            ).all()
        if rows:
            self._after = max(int(r.id) for r in rows)
        notes = [RunNote(self.run_id, r.cycle, r.event_type, json.loads(r.payload)) for r in rows]
        return [n for n in notes if noted(n.event_type, n.payload)]


@dataclass(frozen=True)
class CycleDone:
    """A cycle of a run ended."""

    run_id: str
    model: str
    cycle: int
    last_cycle: int
    seconds: float | None
    tokens_per_s: float | None
    eta_s: float | None


class BatchWatch:
    """Follows the runs of one batch through the database."""

    def __init__(self, engine: Engine, planned: Sequence[tuple[str, str, int]]) -> None:
        """Follow `planned`: (run id, model, cycles) of each run, in batch order."""
        self.engine = engine
        self.views = {r: RunView(r, model, cycles) for r, model, cycles in planned}
        self._after = 0
        self._first = True
        self.notes: list[RunNote] = []
        """The noted events (`NOTED`) read by the polls since the first, for the face to
        show and clear."""

    @classmethod
    def of_batch(cls, engine: Engine, name: str) -> BatchWatch:
        """Follow every run of batch `name`: its plan, queued runs included (empty: none)."""
        with engine.connect() as conn:
            planned = conn.execute(
                select(batch_runs.c.run_id, batch_runs.c.model, batch_runs.c.cycles)
                .where(batch_runs.c.batch == name)
                .order_by(batch_runs.c.position)
            ).all()
            started = conn.execute(
                select(runs.c.run_id, runs.c.model, runs.c.config)
                .where(runs.c.batch == name)
                .order_by(runs.c.run_id)
            ).all()
        known = {r for r, _, _ in planned}
        # Runs of a batch planned before plans were stored are known by their records only.
        older = [(r, m, int(json.loads(c).get("cycles", 0))) for r, m, c in started]
        return cls(
            engine,
            [*((r, m, int(c)) for r, m, c in planned), *(o for o in older if o[0] not in known)],
        )

    def poll(self) -> list[CycleDone]:
        """Read what happened since the last poll; the cycles that ended meanwhile."""
        ended: list[CycleDone] = []
        ids = list(self.views)
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(events.c.id, events.c.run_id, events.c.cycle, events.c.event_type)
                .add_columns(events.c.timestamp, events.c.payload)
                .where(events.c.run_id.in_(ids), events.c.id > self._after)
                .order_by(events.c.id)
            ).all()
        for row in rows:
            self._after = max(self._after, int(row.id))
            done = self._apply(self.views[row.run_id], row.cycle, row.event_type, row)
            if done is not None and not self._first:
                ended.append(done)
            if row.event_type in NOTED and not self._first:
                note = RunNote(row.run_id, row.cycle, row.event_type, json.loads(row.payload))
                if noted(note.event_type, note.payload):
                    self.notes.append(note)
        for record in list_runs(self.engine):
            view = self.views.get(record.run_id)
            if view is not None:
                view.status = record.shown_status
                view.last_cycle = int(record.config.get("cycles", view.last_cycle))
                view.host = record.host
                driven = record.status == "running" and record.driven
                view.driver = f"{record.driver_host or '?'}:{record.pid}" if driven else ""
        with self.engine.connect() as conn:
            held = dict(
                conn.execute(
                    select(leases.c.run_id, leases.c.worker).where(
                        leases.c.run_id.in_(ids), leases.c.released.is_(False)
                    )
                ).all()
            )
        for run_id, view in self.views.items():
            view.worker = str(held.get(run_id, ""))
        self._first = False
        return ended

    def _apply(self, view: RunView, cycle: int, kind: str, row: Any) -> CycleDone | None:
        when = _time(row.timestamp)
        if kind == "CYCLE_START":
            view.cycle, view.step, view.cycle_started = cycle, 0, when
        elif kind == "LLM_INVOCATION":
            payload = json.loads(row.payload)
            view.cycle = cycle
            view.step = int(payload.get("step", view.step + 1))
            rate = tokens_per_s(payload)
            view.tokens_per_s = view.tokens_per_s if rate is None else rate
        elif kind == "CYCLE_END":
            took = when - view.cycle_started if view.cycle_started and view.cycle == cycle else None
            if took is not None:
                view.cycle_seconds.append(took)
            view.done = max(view.done, cycle)
            return CycleDone(
                view.run_id,
                view.model,
                cycle,
                view.last_cycle,
                took,
                view.tokens_per_s,
                view.eta_seconds(when),
            )
        return None


def tokens_per_s(invocation: Mapping[str, Any]) -> float | None:
    """The speed of one model call from its LLM_INVOCATION payload; None when unknown.

    Recorded server numbers are read through the one check: a log written before it may
    hold a 401-digit count (as its digits), which no float division survives.
    """
    seconds = number(invocation.get("duration_s"))
    tokens = number(invocation.get("tokens_out"))
    return None if not seconds or tokens is None else tokens / seconds


def duration(seconds: float | None) -> str:
    """`1h02m`, `3m05s`, `42s`, `2.5s`; `?` when unknown."""
    if seconds is None:
        return "?"
    if seconds < 10:
        return f"{seconds:.1f}s"
    whole = round(seconds)
    if whole >= 3600:
        return f"{whole // 3600}h{whole % 3600 // 60:02d}m"
    if whole >= 60:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole}s"
