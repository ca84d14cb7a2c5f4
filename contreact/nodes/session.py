"""Per-step handles every node needs: the run's scope, its ledger and the storage engine.

Kept in one place so that no node builds its own database access, guesses the run id or
decides which branch it is on. Every node is wrapped in `step`, which re-derives the
lineage from the checkpoint the step runs from (see `checkpoints.lineage`) before the
node body sees the state.
"""

from __future__ import annotations

import dataclasses
import functools
from collections import OrderedDict
from collections.abc import Callable
from contextvars import ContextVar
from functools import lru_cache
from typing import TypeVar, cast

from langchain_core.messages import AIMessage
from langgraph.config import get_config
from langgraph.runtime import Runtime, get_runtime
from sqlalchemy import Engine

from contreact.checkpoints import keys
from contreact.checkpoints.engines import engine_for
from contreact.checkpoints.events import Event, RunFork, sync_log
from contreact.checkpoints.fork import ForkPoint
from contreact.checkpoints.journal import Ledger
from contreact.checkpoints.lineage import (
    MAIN,
    Checkpoint,
    is_fork_point,
    lineage_thread,
    mint,
    scope_of,
    start_branch,
)
from contreact.checkpoints.registry import RunExistsError, create_run, find_run_thread, set_status
from contreact.graph.state import AgentState, Context, StateUpdate

CHECKPOINTER_KEY = "__pregel_checkpointer"
"""Where LangGraph puts the checkpointer in a task's config (langgraph._internal._constants)."""


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


def scope_of_state(state: AgentState) -> str:
    """The key of this branch's journal, events, memory and cycles."""
    return scope_of(run_id_of(state), state.lineage)


@lru_cache(maxsize=1024)
def _registered_thread(engine: Engine, run_id: str) -> str | None:
    # A run's thread never changes once registered, so one lookup per process is enough.
    return find_run_thread(engine, run_id)


def _register(state: AgentState, ctx: Context, engine: Engine, run_id: str) -> str:
    """Register a run that was started elsewhere than the CLI (Studio); its thread."""
    try:
        create_run(
            engine,
            run_id,
            model=ctx.model,
            host=ctx.ollama_host,
            config=ctx.as_config(run_id, state.last_cycle, state.task),
            thread_id=_thread_id(),
            origin="studio",
        )
        # No CLI process drives it: `resume` and `reply` may take it over at any time.
        set_status(engine, run_id, "running", pid=None)
    except RunExistsError:
        pass  # registered meanwhile (another thread won the race: refused below)
    _registered_thread.cache_clear()
    owner = _registered_thread(engine, run_id)
    assert owner is not None
    return owner


def ledger_of(state: AgentState, ctx: Context) -> Ledger:
    """The exactly-once ledger of the run's current branch.

    A run not registered yet (started in Studio) is registered here, at its first step,
    so that the CLI lists it and every command works on it.

    Raises:
        ForeignThreadError: the state names a registered run whose thread is another one
            (e.g. a thread copied in Studio, or a second Studio thread given the same run
            id), which must not write into that run's memory and log; `contreact fork`
            makes a proper branch.
    """
    run_id, engine = run_id_of(state), engine_of(ctx)
    owner = _registered_thread(engine, run_id)
    if owner is None:
        owner = _register(state, ctx, engine, run_id)
    if owner != _thread_id():
        raise ForeignThreadError(
            f"run {run_id} belongs to thread {owner}, not to this thread {_thread_id()}; "
            f"branch it with `contreact fork {run_id} --cycle K --as NEW` instead"
        )
    # LangGraph's id of this `invoke`/`stream` call (the task's own config does not carry it).
    info = get_runtime().execution_info
    invocation = info.run_id if info is not None else None
    return Ledger(ctx.storage, scope_of(run_id, state.lineage), engine, invocation=invocation)


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


def _current_checkpoint(runtime: Runtime[Context]) -> Checkpoint | None:
    info = runtime.execution_info
    if info is None or not info.thread_id:
        return None
    saver = get_config()["configurable"].get(CHECKPOINTER_KEY)
    return Checkpoint(str(info.thread_id), str(info.checkpoint_id or ""), saver)


_checked_invocations: OrderedDict[tuple[str, str], None] = OrderedDict()
"""(thread, invocation run id) whose first step was tested for a fork point. The later
steps of one invocation run from checkpoints its own loop just wrote, which are never
fork points, so one test per `invoke`/`stream` call is enough."""


def _first_step_of_invocation(runtime: Runtime[Context], thread_id: str) -> bool:
    info = runtime.execution_info
    invocation = info.run_id if info is not None else None
    if not invocation:
        return True  # no run id to recognise the invocation by: test every step
    key = (thread_id, str(invocation))
    if key in _checked_invocations:
        return False
    _checked_invocations[key] = None
    if len(_checked_invocations) > 4096:
        _checked_invocations.popitem(last=False)
    return True


def lineage_of(state: AgentState, runtime: Runtime[Context]) -> str:
    """The lineage this step runs in: the state's own, or a new one at a fork point."""
    cp = _current_checkpoint(runtime)
    if cp is None or not _first_step_of_invocation(runtime, cp.thread_id):
        return state.lineage
    engine = engine_of(runtime.context)
    run_id = run_id_of(state)
    parent = scope_of(run_id, state.lineage)
    copied = state.lineage != MAIN and lineage_thread(engine, parent) not in (None, cp.thread_id)
    if not copied and not is_fork_point(engine, cp):
        return state.lineage
    lineage = mint(cp.thread_id, cp.checkpoint_id)
    point = fork_point_of(state)
    scope = start_branch(engine, run_id, parent, lineage, cp, point)
    # The inherited events went to the database only: give the branch its JSONL log.
    sync_log(engine, runtime.context.storage, scope)
    Ledger(runtime.context.storage, scope, engine).emit(
        Event(
            point.cycle,
            keys.branch_start(scope),
            RunFork(
                forked_from=parent,
                at_cycle=point.cycle - 1 if point.steps == 0 else point.cycle,
                model=runtime.context.model,
                at_step=point.steps,
                checkpoint_id=cp.checkpoint_id,
                thread_id=cp.thread_id,
            ),
        )
    )
    return lineage


NodeFunction = TypeVar("NodeFunction", bound=Callable[..., StateUpdate])

node_started: ContextVar[Callable[[str], None] | None] = ContextVar(
    "contreact_node_started", default=None
)
"""Told each node's name as its step begins (the CLI's status line); set by the runner.

A hook rather than LangGraph's "tasks" stream: that stream builds an event holding the
whole state for every task, at a cost per step that was a tenth of contreact's own."""


def step(node: NodeFunction) -> NodeFunction:
    """Wrap a node so that it runs in the right lineage and records a new one in state."""
    name = node.__name__

    @functools.wraps(node)
    def run(state: AgentState, runtime: Runtime[Context]) -> StateUpdate:
        started = node_started.get()
        if started is not None:
            started(name)
        lineage = lineage_of(state, runtime)
        if lineage == state.lineage:
            return changes(state, node(state, runtime))
        update = node(dataclasses.replace(state, lineage=lineage), runtime)
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
