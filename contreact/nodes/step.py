"""What every node step needs: the `node` wrapper, the run's scope and its ledger.

Kept in one place so that no node builds its own storage access, guesses the run id or
decides which branch it is on. The run's storage is the context's persistence (the front
door's contract, `checkpoints.persistence`; its database unless a test hands over another).
Every node is wrapped in `node`, which asks it which lineage the step runs in before the
node body sees the state; the body then takes its ledger with `ledger_of`.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, TypeVar, cast

from langchain_core.messages import AIMessage
from langgraph.config import get_config
from langgraph.runtime import Runtime, get_runtime

from contreact.checkpoints.persistence import (
    ForkPoint,
    Ledger,
    Persistence,
    scope_of,
    sql_persistence,
)
from contreact.config import Config
from contreact.config.sections import OperatorSettings
from contreact.graph.state import AgentState, Context, StateUpdate


def run_id_of(state: AgentState) -> str:
    """The run id; a thread started without one (e.g. from Studio) is named by its thread id."""
    if state.run_id:
        return state.run_id
    return str(get_config()["configurable"]["thread_id"])


def persistence_of(ctx: Context) -> Persistence:
    """The run's storage: the context's persistence, or its storage's database."""
    given: Persistence | None = ctx.persistence_backend
    return given if given is not None else sql_persistence(ctx.store)


def _invocation() -> str | None:
    # LangGraph's id of this `invoke`/`stream` call (the task's own config does not carry it).
    info = get_runtime().execution_info
    return str(info.run_id) if info is not None and info.run_id else None


def ledger_of(state: AgentState, ctx: Context) -> Ledger:
    """The exactly-once ledger of the run's current branch."""
    scope = scope_of(run_id_of(state), state.lineage)
    return persistence_of(ctx).ledger(scope, _invocation())


def fork_point_of(state: AgentState) -> ForkPoint:
    """Where a state stands, as the point a branch from it leaves its parent."""
    if state.status == "completed":
        return ForkPoint(cycle=state.cycle + 1)
    steps = state.stats["steps"]
    last = state.messages[-1] if state.messages else None
    # The last answer's calls have not run while they are pending or the answer is last.
    undone = bool(state.pending) or (isinstance(last, AIMessage) and bool(last.tool_calls))
    return ForkPoint(
        cycle=state.cycle,
        steps=steps,
        steps_done=steps - 1 if undone and steps else steps,
        opened=bool(state.messages),
    )


def studio_config(state: AgentState, ctx: Context, run_id: str) -> dict[str, Any]:
    """The run config a run begun in Studio is registered with: its context's settings.

    Its operator policy is `queue`: Studio answers its own interrupts, and `contreact
    reply` can answer them too.
    """
    config = Config.model_validate(
        {
            **ctx.settings_data(),
            "run_id": run_id,
            "cycles": state.last_cycle,
            "task": state.task,
            "operator": OperatorSettings(mode="queue"),
            "storage": {"data_dir": str(ctx.store.data_dir), "url": ctx.store.url},
        }
    ).pinned()
    return config.model_dump(mode="json")


def lineage_of(state: AgentState, runtime: Runtime[Context]) -> str:
    """The lineage this step runs in: the state's own, or a new one at a fork point."""
    info = runtime.execution_info
    if info is None:
        return state.lineage
    ctx, run_id = runtime.context, run_id_of(state)
    return persistence_of(ctx).enter_step(
        run_id=run_id,
        lineage=state.lineage,
        thread_id=info.thread_id,
        checkpoint_id=str(info.checkpoint_id or ""),
        invocation=str(info.run_id) if info.run_id else None,
        fork_point=lambda: fork_point_of(state),
        model=ctx.model,
        register=lambda: studio_config(state, ctx, run_id),
    )


NodeFunction = TypeVar("NodeFunction", bound=Callable[..., StateUpdate])

node_started: ContextVar[Callable[[str], None] | None] = ContextVar(
    "contreact_node_started", default=None
)
"""Told each node's name as its step begins (the CLI's status line); set by the runner.

A hook rather than LangGraph's "tasks" stream: that stream builds an event holding the
whole state for every task, at a cost per step that was a tenth of contreact's own."""


def node(body: NodeFunction) -> NodeFunction:
    """Make `body` a node: it runs in the right lineage and records a new one in state."""
    name = body.__name__

    @functools.wraps(body)
    def run(state: AgentState, runtime: Runtime[Context]) -> StateUpdate:
        started = node_started.get()
        if started is not None:
            started(name)
        lineage = lineage_of(state, runtime)
        if lineage == state.lineage:
            return changes(state, body(state, runtime))
        update = body(dataclasses.replace(state, lineage=lineage), runtime)
        return {**changes(state, update), "lineage": lineage}

    return cast(NodeFunction, run)


def changes(state: AgentState, update: StateUpdate) -> StateUpdate:
    """`update` without the fields it sets to the value they already have.

    Nodes return whole records (a cycle's fresh counters, the stats they carry along);
    every field written costs a row in the saver's writes table and a new channel version
    in every later checkpoint, though writing a value unchanged changes nothing (no node
    is triggered by a state field). `messages` is appended to, so it is always kept.
    """
    kept = {k: v for k, v in update.items() if k == "messages" or getattr(state, k) != v}
    return cast(StateUpdate, kept)
