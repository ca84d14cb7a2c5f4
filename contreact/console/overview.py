"""The overview's figures: every batch and run, where each stands, and a line per model.

Read with a handful of aggregate queries over the whole storage (the registry, the finished
cycles, each run's newest event, the planned runs, the leases), never run by run, so the
page costs about the same for 1 run or 100. The event stream renders single rows with the
same code (`only`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import Connection, Engine, func, select

from contreact.checkpoints.run_record import record_from_row
from contreact.checkpoints.schema import batch_runs, cycles, events, leases, runs
from contreact.engine.replies import ANSWERED_REASON
from contreact.studies.status import duration

RECENT_CYCLES = 5
"""How many of a run's latest cycles its ETA is reckoned from (its pace now, not at start)."""


@dataclass
class RunRow:
    """One run as the overview shows it."""

    run_id: str
    model: str
    planned: int
    batch: str | None = None
    status: str = "queued"
    """`queued` (planned, not started), `answered` (a reply waits for its drive), else the
    registry's status as `contreact list` shows it."""
    reason: str = ""
    done: int = 0
    """Cycles finished."""
    current: int | None = None
    """The cycle under way, while the run goes."""
    host: str = ""
    worker: str = ""
    """The study worker holding its lease, or the machine and process driving it."""
    last_event: str = ""
    last_at: str = ""
    eta_s: float | None = None
    parent: str | None = None

    @property
    def live(self) -> bool:
        """Whether a process drives it now."""
        return self.status == "running"

    @property
    def eta(self) -> str:
        """The ETA as `3m05s`, `—` when there is none."""
        return "—" if self.eta_s is None else duration(self.eta_s)

    @property
    def last_time(self) -> str:
        """The newest event's time of day (UTC)."""
        return self.last_at[11:19] if len(self.last_at) >= 19 else ""

    @property
    def percent(self) -> int:
        """Cycles finished, as a percentage of those planned."""
        return min(100, round(100 * self.done / self.planned)) if self.planned else 0


@dataclass
class BatchGroup:
    """The runs of one batch (or those started alone)."""

    name: str | None
    rows: list[RunRow] = field(default_factory=list)

    @property
    def done(self) -> int:
        """Cycles finished by its runs."""
        return sum(r.done for r in self.rows)

    @property
    def planned(self) -> int:
        """Cycles its runs are to reach."""
        return sum(r.planned for r in self.rows)


@dataclass
class ModelLine:
    """The runs of one model, counted by where they stand."""

    model: str
    runs: int = 0
    completed: int = 0
    running: int = 0
    waiting: int = 0
    """Paused for the operator, or answered and about to go on."""
    stopped: int = 0
    """Failed or interrupted: a person looks."""
    queued: int = 0
    done: int = 0
    planned: int = 0

    @property
    def percent(self) -> int:
        """Cycles finished, as a percentage of those planned."""
        return min(100, round(100 * self.done / self.planned)) if self.planned else 0


def _seconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp).timestamp()


def read_rows(engine: Engine, only: Collection[str] | None = None) -> list[RunRow]:
    """Every run (or those in `only`), the planned ones not started yet included."""
    rows: dict[str, RunRow] = {}
    with engine.connect() as conn:
        registry = select(runs)
        planned = select(batch_runs).order_by(batch_runs.c.batch, batch_runs.c.position)
        finished = select(cycles.c.run_id, func.count()).group_by(cycles.c.run_id)
        newest = select(events.c.run_id, func.max(events.c.id).label("last")).group_by(
            events.c.run_id
        )
        held = select(leases.c.run_id, leases.c.worker).where(leases.c.released.is_(False))
        if only is not None:
            chosen = list(only)
            registry = registry.where(runs.c.run_id.in_(chosen))
            planned = planned.where(batch_runs.c.run_id.in_(chosen))
            finished = finished.where(cycles.c.run_id.in_(chosen))
            newest = newest.where(events.c.run_id.in_(chosen))
            held = held.where(leases.c.run_id.in_(chosen))
        for plan in conn.execute(planned).mappings():
            rows[plan["run_id"]] = RunRow(
                plan["run_id"], plan["model"], int(plan["cycles"]), batch=plan["batch"]
            )
        for raw in conn.execute(registry.order_by(runs.c.created_at, runs.c.run_id)).mappings():
            record = record_from_row(dict(raw))
            row = rows.setdefault(
                record.run_id,
                RunRow(record.run_id, record.model, 0, batch=record.batch),
            )
            row.model, row.batch, row.host = record.model, record.batch, record.host
            row.planned = int(record.config.get("cycles", row.planned) or 0)
            row.parent = record.parent_run_id
            row.status = record.shown_status
            if row.status == "interrupted" and record.reason == ANSWERED_REASON:
                row.status = "answered"
            row.reason = "" if row.status in ("running", "completed") else record.reason
            if row.status == "interrupted" and not row.reason:
                row.reason = f"its process stopped; `contreact resume {record.run_id}` goes on"
            if row.live:
                row.worker = f"{record.driver_host or '?'}:{record.pid}"
        for run_id, count in conn.execute(finished):
            if run_id in rows:
                rows[run_id].done = int(count)
        last = newest.subquery()
        latest = select(events.c.run_id, events.c.cycle, events.c.event_type, events.c.timestamp)
        for run_id, cycle, kind, stamp in conn.execute(
            latest.join(last, events.c.id == last.c.last)
        ):
            seen = rows.get(run_id)
            if seen is not None:
                seen.last_event, seen.last_at = str(kind), str(stamp)
                if seen.live and int(cycle) > seen.done:
                    seen.current = int(cycle)
        for run_id, worker in conn.execute(held):
            holder = rows.get(run_id)
            if holder is not None:
                # A lease whose holder stopped beating is shown as such, not as a live worker.
                holder.worker = str(worker) if holder.live else f"{worker} (silent)"
        for row in rows.values():
            if row.live:
                row.eta_s = pace_of(conn, row).eta(row)
    return list(rows.values())


@dataclass
class Pace:
    """When a run's latest cycles started and ended: its pace now, for its ETA."""

    starts: dict[int, float] = field(default_factory=dict)
    spans: list[float] = field(default_factory=list)

    def saw(self, cycle: int, kind: str, stamp: str) -> None:
        """Take in a CYCLE_START or CYCLE_END (other events tell nothing of the pace)."""
        if kind == "CYCLE_START":
            self.starts[cycle] = _seconds(stamp)
            for old in [c for c in self.starts if c < cycle - RECENT_CYCLES]:
                del self.starts[old]
        elif kind == "CYCLE_END" and cycle in self.starts:
            self.spans = [*self.spans, _seconds(stamp) - self.starts[cycle]][-RECENT_CYCLES:]

    def eta(self, row: RunRow) -> float | None:
        """Seconds until `row`'s last cycle ends at this pace (None: no cycle timed yet)."""
        if not self.spans:
            return None
        pace = sum(self.spans) / len(self.spans)
        under_way = self.starts.get(row.current or -1)
        elapsed = 0.0
        if under_way is not None and row.last_at:
            elapsed = max(0.0, _seconds(row.last_at) - under_way)
        return max(0.0, pace * (row.planned - row.done) - elapsed)


def pace_of(conn: Connection, row: RunRow) -> Pace:
    """The pace of `row`'s latest cycles, from their CYCLE_START and CYCLE_END events."""
    query = (
        select(events.c.cycle, events.c.event_type, events.c.timestamp)
        .where(
            events.c.run_id == row.run_id,
            events.c.cycle > row.done - RECENT_CYCLES,
            events.c.event_type.in_(("CYCLE_START", "CYCLE_END")),
        )
        .order_by(events.c.id)
    )
    pace = Pace()
    for cycle, kind, stamp in conn.execute(query):
        pace.saw(int(cycle), str(kind), str(stamp))
    return pace


def saw_event(row: RunRow, pace: Pace, cycle: int, kind: str, stamp: str) -> None:
    """Bring `row` up to one more event of its run (the feed reads only what is new)."""
    row.last_event, row.last_at = kind, stamp
    if kind == "CYCLE_END":
        row.done = max(row.done, cycle)
    row.current = cycle if row.live and cycle > row.done else None
    pace.saw(cycle, kind, stamp)
    row.eta_s = pace.eta(row) if row.live else None


def groups(rows: Sequence[RunRow]) -> list[BatchGroup]:
    """Rows by batch (batches by name, then the runs started alone), each in its order."""
    found: dict[str | None, BatchGroup] = {}
    for row in rows:
        found.setdefault(row.batch, BatchGroup(row.batch)).rows.append(row)
    named = sorted((g for g in found.values() if g.name is not None), key=lambda g: str(g.name))
    alone = [g for g in found.values() if g.name is None]
    return [*named, *alone]


def per_model(rows: Sequence[RunRow]) -> list[ModelLine]:
    """A line per model, in order of first appearance."""
    lines: dict[str, ModelLine] = {}
    for row in rows:
        line = lines.setdefault(row.model, ModelLine(row.model))
        line.runs += 1
        line.done += row.done
        line.planned += row.planned
        if row.status == "completed":
            line.completed += 1
        elif row.status == "running":
            line.running += 1
        elif row.status in ("paused", "answered"):
            line.waiting += 1
        elif row.status == "queued":
            line.queued += 1
        else:
            line.stopped += 1
    return list(lines.values())


def waiting_count(rows: Sequence[RunRow]) -> int:
    """How many runs wait for the operator."""
    return sum(1 for r in rows if r.status == "paused")


def status_counts(rows: Sequence[RunRow]) -> dict[str, int]:
    """How many runs stand where, for the page's headline."""
    counts: dict[str, int] = defaultdict(int)
    for row in rows:
        counts[row.status] += 1
    return dict(counts)
