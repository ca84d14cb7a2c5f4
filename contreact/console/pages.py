"""The overview and the comparison of runs side by side.

The overview lists every batch and run (`console.overview` reads them); the event stream
keeps it current without a reload. Compare puts two or more runs next to each other cycle
by cycle: a fork beside its origin (the cycles they share marked), or one model beside
another.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from contreact.checkpoints.cycles import CycleRecord, cycle_records
from contreact.checkpoints.registry import RunNotFoundError, RunRecord, get_run, list_runs
from contreact.console.context import Console, console_of
from contreact.console.overview import (
    RunRow,
    groups,
    per_model,
    read_rows,
    status_counts,
    waiting_count,
)
from contreact.tools.memory import memory_snapshot

COMPARED_AT_MOST = 4
"""Runs side by side at most (more do not fit a screen)."""


def overview_values(rows: list[RunRow]) -> dict[str, Any]:
    """What the overview's templates show of `rows`."""
    return {
        "groups": groups(rows),
        "models": per_model(rows),
        "counts": status_counts(rows),
        "waiting": waiting_count(rows),
        "total": len(rows),
    }


def overview(request: Request) -> Response:
    """Every batch and run."""
    console = console_of(request)
    return console.page(request, "overview.html", **overview_values(read_rows(console.engine)))


def overview_fragment(request: Request) -> Response:
    """The overview's body, read again (a run was added or removed)."""
    console = console_of(request)
    return console.page(request, "_overview.html", **overview_values(read_rows(console.engine)))


@dataclass(frozen=True)
class Column:
    """One run of a comparison."""

    record: RunRecord
    cycles: dict[int, CycleRecord]
    memory: dict[str, str]


@dataclass(frozen=True)
class Cell:
    """One run's cycle in a comparison row."""

    record: CycleRecord | None
    same: bool
    """Its reflection is the first run's of that cycle (a fork's shared cycles)."""


def _columns(console: Console, chosen: list[str]) -> tuple[list[Column], list[str]]:
    columns, missing = [], []
    for run_id in chosen:
        try:
            record = get_run(console.engine, run_id)
        except RunNotFoundError:
            missing.append(run_id)
            continue
        found = {r.cycle: r for r in cycle_records(console.engine, run_id)}
        columns.append(Column(record, found, memory_snapshot(console.engine, run_id)))
    return columns, missing


def compare(request: Request) -> Response:
    """Runs side by side (`?run=A&run=B`), or the choice of runs to compare."""
    console = console_of(request)
    chosen = list(dict.fromkeys(request.query_params.getlist("run")))[:COMPARED_AT_MOST]
    columns, missing = _columns(console, chosen)
    numbers = sorted({n for c in columns for n in c.cycles})
    rows = []
    for number in numbers:
        first = columns[0].cycles.get(number)
        cells = [
            Cell(
                c.cycles.get(number),
                i > 0
                and first is not None
                and c.cycles.get(number) is not None
                and c.cycles[number].reflection == first.reflection,
            )
            for i, c in enumerate(columns)
        ]
        rows.append((number, cells))
    keys = sorted({k for c in columns for k in c.memory})
    records = list_runs(console.engine)
    forks = [(r.run_id, r.parent_run_id) for r in records if r.parent_run_id]
    return console.page(
        request,
        "compare.html",
        columns=columns,
        rows=rows,
        keys=keys,
        missing=missing,
        everyone=[r.run_id for r in records],
        forks=forks,
        chosen=chosen,
    )


ROUTES = [
    Route("/", overview),
    Route("/fragments/overview", overview_fragment),
    Route("/compare", compare),
]
