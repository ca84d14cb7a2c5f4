"""Which runs an analysis covers, and the few stored events it reads besides the cycles.

Every analysis command takes "these runs" or "this batch"; resolving that once, with one
error type for input a researcher must fix, keeps the commands consistent and lets the
CLI map every such problem to exit code 2 with one line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from sqlalchemy import Engine, select

from contreact.checkpoints.event_store import STREAMED_ROWS
from contreact.checkpoints.registry import RunRecord, get_run, list_runs
from contreact.checkpoints.schema import events

_REPLICATE = re.compile(r"\.r(\d+)$")


def replicate_of(run_id: str) -> int | None:
    """N of a batch run's id `<batch>.<model>.rN`, else None."""
    match = _REPLICATE.search(run_id)
    return int(match.group(1)) if match else None


def run_order(run_id: str) -> tuple[str | int, ...]:
    """A key that sorts run ids as a reader expects: `b.m.r2` before `b.m.r10`."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", run_id))


def in_study_order(runs: Sequence[RunRecord]) -> list[RunRecord]:
    """Runs by batch, then model (each in order of first appearance), then replicate.

    The order a study's config lists them, which every table and matrix of runs follows.
    The registry lists runs as they started, and with `--parallel` or several workers a
    later replicate may start (and finish) before an earlier one.
    """
    batch = {b: i for i, b in reversed(list(enumerate(r.batch for r in runs)))}
    first = {m: i for i, m in reversed(list(enumerate(r.model for r in runs)))}
    return sorted(runs, key=lambda r: (batch[r.batch], first[r.model], replicate_of(r.run_id) or 0))


class AnalysisInputError(ValueError):
    """The runs or options given to an analysis cannot be used (the CLI exits 2)."""


def select_runs(
    engine: Engine,
    run_ids: Sequence[str] | None = None,
    batch: str | Sequence[str] | None = None,
) -> list[RunRecord]:
    """The runs named by id (in the order given, duplicates dropped) and/or by batch.

    Args:
        engine: The storage's engine.
        run_ids: Run ids; unknown ones raise.
        batch: A batch name, or several; every run registered with it, oldest first.

    Returns:
        The runs, ids first, then each batch's runs not already named.

    Raises:
        RunNotFoundError: A named run does not exist.
        AnalysisInputError: Nothing was selected, or the batch has no runs.
    """
    chosen: dict[str, RunRecord] = {}
    for run_id in run_ids or []:
        if run_id not in chosen:
            chosen[run_id] = get_run(engine, run_id)
    for name in [batch] if isinstance(batch, str) else batch or []:
        members = [r for r in list_runs(engine) if r.batch == name]
        if not members:
            raise AnalysisInputError(f"no runs belong to batch {name!r}")
        for record in members:
            chosen.setdefault(record.run_id, record)
    if not chosen:
        raise AnalysisInputError("name at least one run, or a batch with --batch NAME")
    return list(chosen.values())


def events_of_type(
    engine: Engine, run_id: str, types: Iterable[str], *, upto_cycle: int | None = None
) -> Iterator[tuple[int, str, dict[str, Any]]]:
    """`(cycle, event_type, payload)` of a run's events of the given types, in log order.

    Reads only those rows (a long run's LLM_INVOCATION payloads are most of its log, and
    most analyses never need them), and streams them: a 10,000-cycle run's rows are
    decoded one at a time, never held together. With `upto_cycle`, only cycles up to it.
    """
    query = (
        select(events.c.cycle, events.c.event_type, events.c.payload)
        .where(events.c.run_id == run_id, events.c.event_type.in_(list(types)))
        .order_by(events.c.id)
    )
    if upto_cycle is not None:
        query = query.where(events.c.cycle <= upto_cycle)
    with engine.connect() as conn:
        for c, t, p in conn.execution_options(yield_per=STREAMED_ROWS).execute(query):
            yield int(c), str(t), json.loads(p)
