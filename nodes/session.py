"""Per-run handles every node needs: the run id, the ledger and the storage engine.

Kept in one place so that no node builds its own database access or guesses the run id.
"""

from __future__ import annotations

from langgraph.config import get_config
from sqlalchemy import Engine

from checkpoints.db import engine_for
from checkpoints.journal import Ledger
from graph.state import AgentState, Context


def run_id_of(state: AgentState) -> str:
    """The run id; a thread started without one (e.g. from Studio) is named by its thread id."""
    if state.run_id:
        return state.run_id
    return str(get_config()["configurable"]["thread_id"])


def engine_of(ctx: Context) -> Engine:
    """The database engine of the run's storage."""
    return engine_for(ctx.storage)


def ledger_of(state: AgentState, ctx: Context) -> Ledger:
    """The exactly-once ledger of the run."""
    return Ledger(ctx.storage, run_id_of(state), engine_of(ctx))


def step_key(cycle: int, step: int, what: str) -> str:
    """Deterministic key of a side effect: built from checkpointed counters only."""
    return f"c{cycle}:s{step}:{what}"
