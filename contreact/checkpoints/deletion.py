"""Deleting a run: every row and file that is the run's, nothing that is another run's.

A run leaves rows in many tables (registry, checkpoints of its thread, memory, journal,
events, finished cycles, branches, PEI ratings) and files in the data directory (its
JSONL logs, a batch's config and output for it). Branches of the run (Studio time
travel) are scopes `RUN@LINEAGE` and go with it; runs forked from it with `contreact
fork` are runs of their own (their history was copied) and stay.

The registry row goes last, in the same transaction as the other rows, so an
interrupted delete leaves a run that `delete` can finish.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import ColumnElement, Table, delete, or_, select

from contreact.checkpoints.engines import engine_for
from contreact.checkpoints.lineage import SCOPE_SEPARATOR
from contreact.checkpoints.registry import get_run
from contreact.checkpoints.schema import (
    batch_runs,
    cycles,
    events,
    journal,
    leases,
    lineages,
    memories,
    operator_replies,
    pei,
    pei_repeats,
    runs,
    similarity_keys,
)
from contreact.checkpoints.storage import Storage

SCOPED = (events, journal, memories, cycles, similarity_keys)
"""Tables keyed by scope: the run id, or `RUN@LINEAGE` for a branch of it."""


class RunIsLiveError(Exception):
    """The run is being driven by a process right now."""


@dataclass
class Deleted:
    """What `delete_run` removed."""

    rows: dict[str, int] = field(default_factory=dict)
    """Rows per table."""
    files: list[Path] = field(default_factory=list)


def _of_run(table: Table, run_id: str) -> ColumnElement[bool]:
    column = table.c.run_id
    return or_(column == run_id, column.startswith(run_id + SCOPE_SEPARATOR, autoescape=True))


def run_files(storage: Storage, run_id: str) -> list[Path]:
    """The run's files: its logs (and its branches'), its batch config and output."""
    found: list[Path] = []
    logs = storage.logs_dir
    if logs.is_dir():
        for path in logs.iterdir():
            name = path.name
            for suffix in (".jsonl", ".jsonl.tmp"):
                if name.endswith(suffix):
                    scope = name[: -len(suffix)]
                    if scope == run_id or scope.startswith(run_id + SCOPE_SEPARATOR):
                        found.append(path)
    batches = storage.data_dir / "batches"
    if batches.is_dir():
        for folder in batches.iterdir():
            found += [
                p for p in (folder / f"{run_id}.yaml", folder / f"{run_id}.out") if p.is_file()
            ]
    return sorted(found)


def delete_run(storage: Storage, run_id: str) -> Deleted:
    """Remove run `run_id` entirely.

    Raises:
        RunNotFoundError: no such run.
        RunIsLiveError: a process drives it now (stop it first).
    """
    engine = engine_for(storage)
    record = get_run(engine, run_id)
    if record.shown_status == "running":
        raise RunIsLiveError(run_id)
    deleted = Deleted()
    with engine.connect() as conn:
        threads = {record.thread_id} | set(
            conn.execute(select(lineages.c.thread_id).where(lineages.c.run_id == run_id)).scalars()
        )
        # A thread another run is registered under is that run's (never ours to delete).
        others = set(
            conn.execute(
                select(runs.c.thread_id).where(
                    runs.c.thread_id.in_(threads), runs.c.run_id != run_id
                )
            ).scalars()
        )
    _delete_checkpoints(storage, sorted(threads - others))
    with engine.begin() as conn:
        for table in SCOPED:
            deleted.rows[table.name] = conn.execute(
                delete(table).where(_of_run(table, run_id))
            ).rowcount
        for table in (lineages, pei, pei_repeats, batch_runs, leases, operator_replies):
            deleted.rows[table.name] = conn.execute(
                delete(table).where(table.c.run_id == run_id)
            ).rowcount
        deleted.rows[runs.name] = conn.execute(delete(runs).where(runs.c.run_id == run_id)).rowcount
    for path in run_files(storage, run_id):
        path.unlink(missing_ok=True)
        deleted.files.append(path)
    return deleted


def _delete_checkpoints(storage: Storage, threads: list[str]) -> None:
    from contreact.checkpoints.saver import open_saver

    with open_saver(storage) as saver:
        for thread in threads:
            saver.delete_thread(thread)
