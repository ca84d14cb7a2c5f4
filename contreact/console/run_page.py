"""The run page: the transcript cycle by cycle, the memory viewer, the plot, the provenance.

The page is read in parts so that it opens fast however long the run: the finished cycles
as one line each (from the cycle table), the newest one's transcript, the memory at the end
of the newest cycle. Any other cycle's transcript is read when it is opened, and while the
run goes the page follows it: each message of the feed has the header and the cycle under
way read again (`tail`), and cycles that finished meanwhile added.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from threading import Lock
from typing import Any

from sqlalchemy import Engine, select
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from contreact.analysis.metrics import cycle_table
from contreact.analysis.report.methods import provenance_of
from contreact.checkpoints.cycles import CycleRecord, cycle_records
from contreact.checkpoints.event_store import as_line
from contreact.checkpoints.fork import ForkPoint, memory_at
from contreact.checkpoints.registry import RunNotFoundError, RunRecord, get_run
from contreact.checkpoints.schema import events
from contreact.console.context import Console, console_of
from contreact.console.overview import RunRow, read_rows
from contreact.console.plots import run_figure
from contreact.console.transcript import Entry, entries

PREVIEW_CHARS = 220
"""How much of a reflection a cycle's one line shows."""


@dataclass(frozen=True)
class MemoryItem:
    """A key of the memory at the end of a cycle, and how it changed in that cycle."""

    key: str
    value: str
    change: str
    """`added`, `changed`, `removed` (the value is the one before) or empty."""
    before: str = ""


def cycle_events(engine: Engine, run_id: str, cycle: int) -> list[dict[str, Any]]:
    """The events of one cycle of a run, in log order."""
    query = (
        select(events)
        .where(events.c.run_id == run_id, events.c.cycle == cycle)
        .order_by(events.c.id)
    )
    with engine.connect() as conn:
        return [as_line(run_id, dict(row)) for row in conn.execute(query).mappings()]


def memory_view(engine: Engine, run_id: str, cycle: int) -> list[MemoryItem]:
    """The memory at the end of `cycle`, replayed as a fork replays it, with its changes."""
    with engine.connect() as conn:
        now = memory_at(conn, run_id, ForkPoint(cycle=cycle + 1))
        before = memory_at(conn, run_id, ForkPoint(cycle=cycle)) if cycle > 1 else {}
    items = [
        MemoryItem(
            key,
            value,
            "added" if key not in before else "changed" if before[key] != value else "",
            before.get(key, ""),
        )
        for key, value in sorted(now.items())
    ]
    items += [MemoryItem(k, v, "removed") for k, v in sorted(before.items()) if k not in now]
    return items


def preview(text: str) -> str:
    """A reflection's first words, for its cycle's line."""
    flat = " ".join(text.split())
    return flat if len(flat) <= PREVIEW_CHARS else flat[: PREVIEW_CHARS - 1] + "…"


class _Plots:
    """Recent figures by run and finished cycles: a figure is drawn once per new cycle."""

    def __init__(self, most: int = 64) -> None:
        self.most = most
        self.cache: OrderedDict[tuple[str, int], bytes] = OrderedDict()
        self.lock = Lock()

    def of(self, engine: Engine, record: RunRecord, done: int) -> bytes:
        key = (record.run_id, done)
        # One figure drawn at a time: pages asking for the same one wait and share it, and
        # a busy machine is not asked to draw several at once.
        with self.lock:
            if key not in self.cache:
                self.cache[key] = run_figure(cycle_table(engine, record))
                while len(self.cache) > self.most:
                    self.cache.popitem(last=False)
            self.cache.move_to_end(key)
            return self.cache[key]


PLOTS = _Plots()


def _record(console: Console, run_id: str) -> RunRecord | None:
    try:
        return get_run(console.engine, run_id)
    except RunNotFoundError:
        return None


def _row(console: Console, run_id: str) -> RunRow:
    return read_rows(console.engine, [run_id])[0]


def _missing(console: Console, request: Request, run_id: str) -> HTMLResponse:
    return console.page(request, "missing.html", status=404, run_id=run_id)


def run_page(request: Request) -> Response:
    """The whole page of one run."""
    console = console_of(request)
    run_id = str(request.path_params["run_id"])
    record = _record(console, run_id)
    if record is None:
        return _missing(console, request, run_id)
    records = cycle_records(console.engine, run_id)
    row = _row(console, run_id)
    last = records[-1].cycle if records else 0
    provenance, started, ended = provenance_of(console.engine, record)
    return console.page(
        request,
        "run.html",
        record=record,
        row=row,
        cycles=[_line(r) for r in records],
        newest=entries(cycle_events(console.engine, run_id, last)) if last else [],
        last=last,
        tail=_tail_entries(console, row),
        memory=memory_view(console.engine, run_id, last) if last else [],
        memory_cycle=last,
        choices=[r.cycle for r in records],
        provenance=provenance,
        started=started,
        ended=ended,
        stream=f"/stream/runs/{run_id}",
    )


def _line(record: CycleRecord) -> dict[str, Any]:
    m = record.metrics
    return {
        "cycle": record.cycle,
        "preview": preview(record.reflection),
        "steps": m.get("steps", 0),
        "tool_calls": m.get("tool_calls", 0),
        "memory_ops": m.get("memory_ops_total", 0),
        "operator": m.get("messages_to_operator", 0),
        "similarity": record.similarity,
        "flags": record.flags,
    }


def _tail_entries(console: Console, row: RunRow) -> list[Entry]:
    """The events of the cycle under way (none when no cycle is open)."""
    if row.current is None:
        return []
    return entries(cycle_events(console.engine, row.run_id, row.current))


def cycle(request: Request) -> Response:
    """The transcript of one cycle."""
    console = console_of(request)
    run_id = str(request.path_params["run_id"])
    number = int(request.path_params["cycle"])
    found = entries(cycle_events(console.engine, run_id, number))
    return console.page(request, "_transcript.html", entries=found)


def tail(request: Request) -> Response:
    """What changed while the run went, in one answer per change of the run.

    The cycles finished after `after` and the cycle under way; out of band, the header,
    and once a cycle ended the figure and the memory (when the page shows the latest).
    """
    console = console_of(request)
    run_id = str(request.path_params["run_id"])
    record = _record(console, run_id)
    if record is None:
        return _missing(console, request, run_id)
    try:
        after = int(request.query_params.get("after", "0"))
    except ValueError:
        after = 0
    records = cycle_records(console.engine, run_id, since=after + 1)
    row = _row(console, run_id)
    last = records[-1].cycle if records else after
    picked = "latest" if request.query_params.get("cycle", "latest") == "latest" else "cycle"
    return console.page(
        request,
        "_tail.html",
        record=record,
        record_id=run_id,
        cycles=[_line(r) for r in records],
        last=last,
        tail=_tail_entries(console, row),
        row=row,
        picked=picked,
        memory=memory_view(console.engine, run_id, last) if records else [],
        memory_cycle=last,
        choices=list(range(1, last + 1)) if records else [],
    )


def memory(request: Request) -> Response:
    """The memory at the end of a cycle (`latest`: the newest finished one)."""
    console = console_of(request)
    run_id = str(request.path_params["run_id"])
    choices = [r.cycle for r in cycle_records(console.engine, run_id)]
    asked = request.query_params.get("cycle", "latest")
    chosen = int(asked) if asked.isdigit() and int(asked) in choices else None
    shown = chosen if chosen is not None else (choices[-1] if choices else 0)
    return console.page(
        request,
        "_memory.html",
        record_id=run_id,
        memory=memory_view(console.engine, run_id, shown) if shown else [],
        memory_cycle=shown,
        choices=choices,
        picked="latest" if chosen is None else str(chosen),
    )


def plot(request: Request) -> Response:
    """The run's figure (PNG)."""
    console = console_of(request)
    record = _record(console, str(request.path_params["run_id"]))
    if record is None:
        return Response(status_code=404)
    done = len(cycle_records(console.engine, record.run_id))
    png = PLOTS.of(console.engine, record, done)
    return Response(png, media_type="image/png")


ROUTES = [
    Route("/runs/{run_id}", run_page),
    Route("/runs/{run_id}/cycles/{cycle:int}", cycle),
    Route("/runs/{run_id}/tail", tail),
    Route("/runs/{run_id}/memory", memory),
    Route("/runs/{run_id}/plot.png", plot),
]
