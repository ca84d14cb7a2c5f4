"""Lineage: which branch of a run a step belongs to, so its side effects happen exactly once.

The journal, the event log, the memory and the finished cycles are keyed by a *scope*:
the run id for a run's main line, `RUN@LINEAGE` for a branch. The lineage is a state
field. A step re-run after a crash runs from the same saved checkpoint with the same
state, so it keeps its lineage and replays its records. A step that starts from a fork
point gets a new lineage, minted from the fork point's checkpoint id and the thread (so a
crash there mints the same one again), and a scope that inherits its parent's history
up to that point (`checkpoints.fork`); from there on it acts afresh. A fork point is a
saved checkpoint that

* was made by a state edit (`update_state`, Studio's "edit and fork"), or
* already has a saved successor (Studio time travel: running from an earlier checkpoint),
  or
* belongs to another thread than the lineage it carries (a copied thread).

A checkpoint that nothing saved continues from is never a fork point: it is a step in
flight (under `durability="async"` perhaps not saved yet), the newest of a paused thread,
or one replayed after a crash under a policy that does not save every step; its keys
(built from counters, see `checkpoints.keys`) replay its records. Another thread reusing a run
id is refused before any of this (`checkpoints.persistence.enter_step`).

The test reads the checkpoints table of contreact's database (the SQLite and PostgreSQL
savers contreact opens keep their checkpoints there), never the saver object: a graph
compiled with another saver (one that keeps its checkpoints elsewhere) has no fork points.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import Engine, String, bindparam, select, text
from sqlalchemy.exc import DBAPIError

from contreact.checkpoints import keys
from contreact.checkpoints.event_mirror import sync_log
from contreact.checkpoints.event_schema import Event, RunFork, utc_now
from contreact.checkpoints.fork import ForkPoint, copy_history
from contreact.checkpoints.journal import Ledger
from contreact.checkpoints.schema import lineages
from contreact.checkpoints.statements import Prepared, insert_ignore
from contreact.checkpoints.storage import Storage
from contreact.checkpoints.transactions import reading

MAIN = ""
"""The lineage of a run's main line (its scope is the run id itself)."""

SCOPE_SEPARATOR = "@"


def scope_of(run_id: str, lineage: str) -> str:
    """The key of a branch's journal, events, memory and cycles."""
    return run_id if lineage == MAIN else f"{run_id}{SCOPE_SEPARATOR}{lineage}"


def mint(thread_id: str, checkpoint_id: str) -> str:
    """The lineage of a branch leaving at `checkpoint_id` (the same again after a crash)."""
    return "b" + hashlib.sha256(f"{thread_id}/{checkpoint_id}".encode()).hexdigest()[:12]


@dataclass(frozen=True)
class Checkpoint:
    """What the fork test needs to know of the checkpoint a step runs from."""

    thread_id: str
    checkpoint_id: str


_NEWEST = Prepared(
    lambda _: text(
        "SELECT checkpoint_id, metadata FROM checkpoints WHERE thread_id = :t "
        "AND checkpoint_ns = '' ORDER BY checkpoint_id DESC LIMIT 1"
    ).bindparams(bindparam("t", type_=String))
)
"""Run once per graph invocation (a fork-point test), so kept off SQLAlchemy's slow path."""


def _newest(engine: Engine, cp: Checkpoint) -> tuple[str, str] | None:
    """(id, metadata source) of the thread's newest saved checkpoint, None if it has none."""
    # The SQLite and PostgreSQL savers keep their checkpoints in our database, in a table
    # of the same shape; a query is far cheaper than loading the checkpoint.
    try:
        with reading(engine) as conn:
            row = _NEWEST.first(conn, {"t": cp.thread_id})
    except (DBAPIError, engine.dialect.loaded_dbapi.Error):
        return None  # no checkpoints table: this saver keeps them elsewhere
    if row is None:
        return None
    meta = row[1]
    if isinstance(meta, bytes | str):
        meta = json.loads(meta or "{}")
    return str(row[0]), str((meta or {}).get("source", ""))


def _has_child(engine: Engine, cp: Checkpoint) -> bool:
    """Whether a saved checkpoint continues from `cp` (it is not a line's last)."""
    query = text(
        "SELECT 1 FROM checkpoints WHERE thread_id = :t AND checkpoint_ns = '' "
        "AND parent_checkpoint_id = :c LIMIT 1"
    )
    with engine.connect() as conn:
        return conn.execute(query, {"t": cp.thread_id, "c": cp.checkpoint_id}).first() is not None


def is_fork_point(engine: Engine, cp: Checkpoint) -> bool:
    """Whether a step running from `cp` starts a new branch (see the module docstring)."""
    if not cp.checkpoint_id:
        return False
    newest = _newest(engine, cp)
    if newest is None:
        return False
    newest_id, source = newest
    if newest_id == cp.checkpoint_id:
        return source == "update"
    # Not the newest: an earlier checkpoint that a saved one continues from (time travel),
    # or one in flight (not saved yet, or saved while we looked) that nothing continues.
    return _has_child(engine, cp)


def lineage_thread(engine: Engine, scope: str) -> str | None:
    """The thread a branch was minted on (None for a run's main line)."""
    with engine.connect() as conn:
        found = conn.execute(
            select(lineages.c.thread_id).where(lineages.c.scope == scope)
        ).scalar_one_or_none()
    return None if found is None else str(found)


def start_branch(
    engine: Engine, run_id: str, parent: str, lineage: str, cp: Checkpoint, point: ForkPoint
) -> str:
    """Register branch `lineage` of `run_id` and give it `parent`'s history before `point`.

    Idempotent: a branch already registered is returned as it is.

    Returns:
        The branch's scope.
    """
    scope = scope_of(run_id, lineage)
    with engine.begin() as conn:
        fresh = insert_ignore(
            conn,
            lineages,
            {
                "scope": scope,
                "run_id": run_id,
                "parent_scope": parent,
                "thread_id": cp.thread_id,
                "checkpoint_id": cp.checkpoint_id,
                "cycle": point.cycle,
                "steps": point.steps,
                "steps_done": point.steps_done,
                "created_at": utc_now(),
            },
        )
        if fresh:
            copy_history(conn, parent, scope, point)
    return scope


def lineage_at(
    storage: Storage,
    engine: Engine,
    cp: Checkpoint,
    *,
    run_id: str,
    lineage: str,
    fork_point: Callable[[], ForkPoint],
    model: str,
) -> str:
    """The lineage of a step that runs from `cp`: `lineage`, or a new branch's at a fork point.

    A new branch is registered with its parent's history before the point `fork_point`
    names (`start_branch`), given its JSONL log and its RUN_START-like fork event.
    """
    parent = scope_of(run_id, lineage)
    copied = lineage != MAIN and lineage_thread(engine, parent) not in (None, cp.thread_id)
    if not copied and not is_fork_point(engine, cp):
        return lineage
    branch = mint(cp.thread_id, cp.checkpoint_id)
    point = fork_point()
    scope = start_branch(engine, run_id, parent, branch, cp, point)
    # The inherited events went to the database only: give the branch its JSONL log.
    sync_log(engine, storage, scope)
    Ledger(storage, scope, engine).emit(
        Event(
            point.cycle,
            keys.branch_start(scope),
            RunFork(
                forked_from=parent,
                at_cycle=point.cycle - 1 if point.steps == 0 else point.cycle,
                model=model,
                at_step=point.steps,
                checkpoint_id=cp.checkpoint_id,
                thread_id=cp.thread_id,
            ),
        )
    )
    return branch
