"""Per-run handles every node needs: the run id, the ledger and the storage engine.

Kept in one place so that no node builds its own database access or guesses the run id.
"""

from __future__ import annotations

from functools import lru_cache

from langgraph.config import get_config
from sqlalchemy import Engine

from checkpoints.db import engine_for
from checkpoints.journal import Ledger
from checkpoints.registry import find_run_thread
from graph.state import AgentState, Context


class ForeignThreadError(RuntimeError):
    """A thread carries the run id of a run registered to another thread (a Studio copy)."""


def run_id_of(state: AgentState) -> str:
    """The run id; a thread started without one (e.g. from Studio) is named by its thread id."""
    if state.run_id:
        return state.run_id
    return _thread_id()


def _thread_id() -> str:
    return str(get_config()["configurable"]["thread_id"])


def engine_of(ctx: Context) -> Engine:
    """The database engine of the run's storage."""
    return engine_for(ctx.storage)


@lru_cache(maxsize=1024)
def _registered_thread(engine: Engine, run_id: str) -> str | None:
    # A run's thread never changes once registered, so one lookup per process is enough.
    return find_run_thread(engine, run_id)


def ledger_of(state: AgentState, ctx: Context) -> Ledger:
    """The exactly-once ledger of the run.

    Raises:
        ForeignThreadError: the state names a registered run whose thread is another one
            (e.g. a thread copied in Studio), which must not write into that run's memory
            and log; `contreact fork` makes a proper branch.
    """
    run_id, engine = run_id_of(state), engine_of(ctx)
    owner = _registered_thread(engine, run_id)
    if owner is not None and owner != _thread_id():
        raise ForeignThreadError(
            f"run {run_id} belongs to thread {owner}, not to this thread {_thread_id()}; "
            f"branch it with `contreact fork {run_id} --cycle K --as NEW` instead"
        )
    return Ledger(ctx.storage, run_id, engine)


def step_key(cycle: int, step: int, what: str) -> str:
    """Deterministic key of a side effect: built from checkpointed counters only."""
    return f"c{cycle}:s{step}:{what}"
