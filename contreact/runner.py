"""Start, resume and extend runs: compile the graph with a saver, drive it, answer interrupts.

This is the one place that turns a config into a running graph. It registers the run,
compiles `graph.builder` over the storage's checkpointer, invokes it with
`durability="sync"` (a kill -9 loses at most the model call in flight), answers operator
interrupts according to the run's policy, and records the outcome in the registry. It
never prints: progress goes to a `Progress` the face provides, and the terminal policy
asks the face's `ask_operator` callback.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from langchain_core.runnables import RunnableConfig
from langgraph.types import Command

from checkpoints.cycles import cycle_records
from checkpoints.db import Storage, engine_for
from checkpoints.events import rebuild_log
from checkpoints.registry import (
    RunRecord,
    RunStatus,
    create_run,
    get_run,
    set_status,
)
from checkpoints.saver import open_saver
from contreact.config import Config, apply_overrides, parse_config
from graph import builder, recursion_limit
from graph.state import AgentState, Context, fresh_cycle
from nodes.ollama_client import ModelCallError
from tools.operator import OPERATOR_INTERRUPT

log = logging.getLogger("contreact")

ExitCode = Literal[0, 1, 3]
EXIT_CODES: dict[RunStatus, ExitCode] = {"completed": 0, "failed": 1, "paused": 3, "running": 1}


@dataclass(frozen=True)
class RunOutcome:
    """How a drive of a run ended."""

    run_id: str
    status: RunStatus
    reason: str = ""
    cycle: int = 0

    @property
    def exit_code(self) -> ExitCode:
        """0 done, 3 paused waiting for the operator, 1 failed."""
        return EXIT_CODES[self.status]


class Progress(Protocol):
    """What the face shows while a run moves; the runner calls it, never prints."""

    def started(self, record: RunRecord, state: AgentState | None, resumed: bool) -> None:
        """A drive begins (state is None for a fresh run)."""

    def update(self, node: str, update: dict[str, Any]) -> None:
        """A node finished with this state update."""

    def operator(self, message: str, reply: str | None, policy: str) -> None:
        """The agent messaged the operator (reply None: left waiting in the queue)."""

    def finished(self, outcome: RunOutcome) -> None:
        """The drive ended."""


class SilentProgress:
    """A Progress that shows nothing (library use, tests)."""

    def started(self, record: RunRecord, state: AgentState | None, resumed: bool) -> None:
        """Show nothing."""

    def update(self, node: str, update: dict[str, Any]) -> None:
        """Show nothing."""

    def operator(self, message: str, reply: str | None, policy: str) -> None:
        """Show nothing."""

    def finished(self, outcome: RunOutcome) -> None:
        """Show nothing."""


AskOperator = Callable[[str], str]


class RunAlreadyCompletedError(Exception):
    """`resume` of a completed run without `--cycles`."""


class OperatorUnavailableError(Exception):
    """The terminal policy needs a console and there is none."""


def config_of(record: RunRecord, overrides: dict[str, Any] | None = None) -> Config:
    """The run's stored config, with CLI overrides (`model`, `host`) applied."""
    return parse_config(apply_overrides(record.config, overrides or {}), f"run {record.run_id}")


def start_run(
    config: Config,
    storage: Storage,
    *,
    progress: Progress | None = None,
    ask_operator: AskOperator | None = None,
) -> RunOutcome:
    """Register a new run and drive it to completion, a pause or a failure.

    Raises:
        RunExistsError: the run id is taken (the caller suggests `resume`).
    """
    engine = engine_for(storage)
    ctx = config.to_context(data_dir=str(storage.data_dir))
    record = create_run(
        engine,
        config.run_id,
        model=config.model,
        host=ctx.ollama_host,
        config=config.model_dump(mode="json"),
    )
    start = {"run_id": config.run_id, "last_cycle": config.cycles, "task": config.task}
    return _drive(record, config, ctx, storage, start, progress or SilentProgress(), ask_operator)


def resume_run(
    run_id: str,
    storage: Storage,
    *,
    extra_cycles: int | None = None,
    overrides: dict[str, Any] | None = None,
    progress: Progress | None = None,
    ask_operator: AskOperator | None = None,
) -> RunOutcome:
    """Continue a run from its last checkpoint; `extra_cycles` extends a finished run.

    Raises:
        RunNotFoundError: no such run.
        RunAlreadyCompletedError: the run is complete and no extension was asked for.
    """
    engine = engine_for(storage)
    record = get_run(engine, run_id)
    if record.status == "running" and record.process_alive and not _is_self(record):
        raise RuntimeError(
            f"run {run_id} is being driven by process {record.pid}; stop it before resuming"
        )
    config = config_of(record, overrides)
    ctx = config.to_context(data_dir=str(storage.data_dir))
    if overrides:
        set_status(
            engine,
            run_id,
            record.status,
            reason=record.reason,
            config=config.model_dump(mode="json"),
            model=config.model,
            host=ctx.ollama_host,
        )
    start = {"run_id": run_id, "last_cycle": config.cycles, "task": config.task}
    return _drive(
        record,
        config,
        ctx,
        storage,
        start,
        progress or SilentProgress(),
        ask_operator,
        resume=True,
        extra_cycles=extra_cycles,
    )


def _is_self(record: RunRecord) -> bool:
    return record.pid == os.getpid()


def _drive(
    record: RunRecord,
    config: Config,
    ctx: Context,
    storage: Storage,
    start: dict[str, Any],
    progress: Progress,
    ask_operator: AskOperator | None,
    *,
    resume: bool = False,
    extra_cycles: int | None = None,
) -> RunOutcome:
    engine = engine_for(storage)
    # A crash between an event's commit and its JSONL append leaves the file short.
    rebuild_log(engine, storage, record.run_id)
    with open_saver(storage) as saver:
        graph = builder.compile(checkpointer=saver, name="contreact")
        thread: RunnableConfig = {"configurable": {"thread_id": record.thread_id}}
        state, payload = _starting_point(graph, thread, record, storage, start, extra_cycles)
        set_status(engine, record.run_id, "running", claim=True)
        progress.started(record, state, resume and state is not None)
        remaining = state.last_cycle - state.cycle + 1 if state else int(start["last_cycle"])
        invocation: RunnableConfig = {**thread, "recursion_limit": recursion_limit(ctx, remaining)}

        def finish(status: RunStatus, reason: str = "") -> RunOutcome:
            cycle = int(graph.get_state(thread).values.get("cycle", 0))
            set_status(engine, record.run_id, status, reason=reason)
            outcome = RunOutcome(record.run_id, status, reason, cycle)
            progress.finished(outcome)
            return outcome

        while True:
            try:
                for chunk in graph.stream(
                    payload, invocation, context=ctx, durability="sync", stream_mode="updates"
                ):
                    for node, update in chunk.items():
                        if node != "__interrupt__" and isinstance(update, dict):
                            progress.update(node, update)
            except ModelCallError as error:
                return finish("failed", error.message)
            except KeyboardInterrupt:
                finish("failed", f"interrupted; continue with `contreact resume {record.run_id}`")
                raise
            except Exception as exc:
                finish("failed", f"{type(exc).__name__}: {exc}")
                raise
            snapshot = graph.get_state(thread)
            asks = [i.value for i in snapshot.interrupts if _is_operator(i.value)]
            if not asks:
                if snapshot.values.get("status") == "completed" and not snapshot.next:
                    return finish("completed")
                return finish("failed", f"the graph stopped unexpectedly before {snapshot.next}")
            message = str(asks[0].get("message", ""))
            answer = _answer(config, message, ask_operator)
            if answer is None:
                progress.operator(message, None, "queue")
                return finish("paused", "waiting for the operator's reply")
            progress.operator(message, answer["reply"], answer["policy"])
            payload = Command(resume=answer)


def _starting_point(
    graph: Any,
    thread: RunnableConfig,
    record: RunRecord,
    storage: Storage,
    start: dict[str, Any],
    extra_cycles: int | None,
) -> tuple[AgentState | None, Any]:
    """The state to continue from (None: no checkpoint yet) and the input to invoke with.

    A run killed before its first checkpoint has no state and starts fresh. A completed
    run is only continued when extended: the next cycle is opened as if `reflect` had
    started it.
    """
    snapshot = graph.get_state(thread)
    if not snapshot.values:
        return None, start
    state = AgentState(**snapshot.values)
    if snapshot.next or state.status != "completed":
        return state, None
    if not extra_cycles:
        raise RunAlreadyCompletedError(record.run_id)
    last = state.last_cycle + extra_cycles
    graph.update_state(
        thread,
        {
            **fresh_cycle(state.cycle + 1, _last_advisory(storage, record.run_id)),
            "last_cycle": last,
        },
        as_node="reflect",
    )
    engine = engine_for(storage)
    set_status(engine, record.run_id, "running", config={**record.config, "cycles": last})
    return AgentState(**graph.get_state(thread).values), None


def _is_operator(value: Any) -> bool:
    return isinstance(value, dict) and value.get("type") == OPERATOR_INTERRUPT


def _answer(
    config: Config, message: str, ask_operator: AskOperator | None
) -> dict[str, str] | None:
    """The reply by the run's operator policy; None leaves the run paused (queue)."""
    mode = config.operator.mode
    if mode == "auto":
        return {"reply": config.operator.reply, "policy": "auto"}
    if mode == "terminal":
        if ask_operator is None:
            raise OperatorUnavailableError(
                "operator mode 'terminal' needs an interactive console; use mode 'queue' or 'auto'"
            )
        return {"reply": ask_operator(message), "policy": "terminal"}
    return None


def _last_advisory(storage: Storage, run_id: str) -> str | None:
    records = cycle_records(engine_for(storage), run_id)
    return records[-1].advisory if records else None
