"""Drive a registered run: the step loop, its outcome, operator pauses and storage faults.

The runner (`engine.runner`) decides what to drive (a new run, a resume, an extension, a
fork); this module moves the graph over the run's checkpoints until the run completes,
pauses for the operator or fails, and records each outcome in the registry. It never
prints: progress goes to the face's `Progress`.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.types import Command
from sqlalchemy import Engine

from contreact.checkpoints import keys
from contreact.checkpoints.cycles import cycle_records
from contreact.checkpoints.engines import engine_for, fault_of
from contreact.checkpoints.event_schema import Event, OperatorMessage, Provenance
from contreact.checkpoints.event_store import count_events, numbered, payload_of
from contreact.checkpoints.fencing import lease_lost
from contreact.checkpoints.journal import BadRecordError, Ledger
from contreact.checkpoints.persistence import Checkpointed, Latest, open_run
from contreact.checkpoints.registry import (
    Heartbeat,
    RunRecord,
    RunStatus,
    set_status,
)
from contreact.checkpoints.statistics import Statistics
from contreact.checkpoints.storage import Storage
from contreact.checkpoints.storage_faults import StorageFault
from contreact.checkpoints.transactions import Tx
from contreact.config import Config
from contreact.engine.operator_policy import AskOperator
from contreact.engine.operator_policy import answer as answer_by_policy
from contreact.engine.outcome import Progress, RunOutcome, SilentProgress
from contreact.engine.replies import recorded_reply
from contreact.engine.tracing import traced
from contreact.errors import (
    LeaseLostError,
    OperatorUnavailableError,
    RunAlreadyCompletedError,
    detail,
)
from contreact.extensions.hooks import HookError
from contreact.extensions.loading import extensions_of
from contreact.graph.state import AgentState, Context, fresh_cycle
from contreact.graph.wiring import builder, recursion_limit
from contreact.nodes.provenance import gather
from contreact.nodes.step import node_started
from contreact.ollama.client import ModelCallError
from contreact.tools.custom import ExtensionError
from contreact.tools.operator import OPERATOR_INTERRUPT

log = logging.getLogger("contreact")


Handed = Mapping[str, Sequence[Any]]
"""Tools and hooks handed over from Python: `{"tools": [...], "hooks": [...]}`."""


def context_of(config: Config, storage: Storage, handed: Handed | None) -> Context:
    """The context that executes `config` on `storage`, with the Python-handed extensions."""
    ctx = Context.of(config, storage)
    return ctx.model_copy(update={"extensions": dict(handed)}) if handed else ctx


def _first_input(record: RunRecord, config: Config, storage: Storage) -> dict[str, Any]:
    """The input that starts a run with no checkpoint yet: cycle 1, or a fork's next cycle."""
    first = (record.fork_cycle or 0) + 1
    # A fork that does not watch similarity (a PEI question) must not inherit an advisory.
    inherit = record.fork_cycle and config.similarity.enabled
    advisory = _advisory_after(storage, record.run_id, first - 1) if inherit else None
    return {
        **fresh_cycle(first, advisory),
        "run_id": record.run_id,
        "last_cycle": config.cycles,
        "task": config.task,
    }


def drive(
    record: RunRecord,
    config: Config,
    storage: Storage,
    extension: tuple[int, str | None] | None,
    progress: Progress | None,
    ask_operator: AskOperator | None,
    *,
    resume: bool = False,
    handed: Handed | None = None,
) -> RunOutcome:
    """Drive a registered run until it completes, pauses for the operator or fails.

    Args:
        record: The run as registered.
        config: Its config (overrides applied).
        storage: Where it lives.
        extension: Cycles to add to a completed run, and the first added cycle's opening.
        progress: Where to report progress.
        ask_operator: How the terminal policy asks a person.
        resume: The run existed before this drive (a PROVENANCE record is made).
        handed: Tools and hooks as Python objects.

    Raises:
        RunStoppedByStorage: a storage fault stopped the run (nothing committed is lost).
        LeaseLostError: another worker took the run over.
    """
    # While this process drives the run it beats; once it is killed the beat stops and
    # `list`/`status` show the run as interrupted within seconds. On a PostgreSQL without
    # autovacuum it also keeps the run tables' statistics fresh (`checkpoints.statistics`).
    # With the OpenTelemetry variables set, the drive is traced (`engine.tracing`).
    try:
        with (
            Heartbeat(engine_for(storage), record.run_id),
            Statistics(engine_for(storage)),
            traced(storage, record),
        ):
            return _drive_steps(
                record,
                config,
                storage,
                extension,
                progress,
                ask_operator,
                resume=resume,
                handed=handed,
            )
    except RunStoppedByStorage:
        raise
    except Exception as exc:
        said = lease_lost(exc)
        if said is not None:
            raise LeaseLostError(record.run_id, said) from exc
        fault = fault_of(storage, exc)
        if fault is None:
            raise
        raise RunStoppedByStorage(record.run_id, fault) from exc


class RunStoppedByStorage(StorageFault):
    """A storage fault stopped a run: the run is not failed, only stopped (resume it).

    What committed before the fault is kept (every step commits its checkpoint and its
    journal in transactions), so once the fault is gone `resume` continues from there;
    marking the run failed would need a write that the fault forbids anyway.
    """

    def __init__(self, run_id: str, fault: StorageFault) -> None:
        super().__init__(
            f"run {run_id} stopped: {fault}; nothing committed is lost: once that is fixed, "
            f"continue with `contreact resume {run_id}`"
        )


def _drive_steps(
    record: RunRecord,
    config: Config,
    storage: Storage,
    extension: tuple[int, str | None] | None,
    progress: Progress | None,
    ask_operator: AskOperator | None,
    *,
    resume: bool = False,
    handed: Handed | None = None,
) -> RunOutcome:
    progress = progress or SilentProgress()
    ctx = context_of(config, storage, handed)
    # A tool or hook that cannot be loaded, or one the run had and lacks now, stops the run
    # before it moves.
    missing = _missing_tools(engine_for(storage), record.run_id, extensions_of(ctx).toolset.names)
    if missing:
        raise ExtensionError(
            f"run {record.run_id} was started with the tools {', '.join(missing)}, which it "
            "lacks now: install them again, or hand them over (`contreact.run(config, "
            "tools=[...])`) to continue it"
        )
    engine = engine_for(storage)
    with open_run(storage, record.run_id) as saver:
        graph = builder.compile(checkpointer=saver, name="contreact")
        line = Checkpointed(
            graph, record.thread_id, config.persistence.checkpoints, cycle_node="reflect"
        )
        latest = line.latest()
        state, payload = _starting_point(latest, record, config, storage, extension)
        # A reply recorded for the message the thread waits on (`engine.replies`), by this
        # process or any other, answers it now.
        reply = (
            recorded_reply(engine, record.run_id, latest.checkpoint_id)
            if latest.next and latest.checkpoint_id
            else None
        )
        asks = operator_asks(line.interrupts()) if reply is not None else []
        if reply is not None and asks:
            progress.operator(str(asks[0].get("message", "")), reply, "queue")
            payload = Command(resume={"reply": reply, "policy": "queue"})
        set_status(engine, record.run_id, "running", claim=True)
        # A dict payload opens a cycle (new run, fork, extension); None continues `state`.
        if isinstance(payload, dict):
            span = (payload["cycle"], payload["last_cycle"])
        else:
            assert state is not None
            span = (state.cycle, state.last_cycle)
        if resume:
            occasion = "extension" if extension and isinstance(payload, dict) else "resume"
            _record_provenance(storage, record.run_id, ctx, config, occasion, span[0])
        # An extended run is shown from the cycle it opens (5 of 6), not where it ended (4/4).
        shown = None if state is None else replace(state, cycle=span[0], last_cycle=span[1])
        progress.started(record, shown, resume and state is not None)
        limit = recursion_limit(ctx, span[1] - span[0] + 1)

        def finish(status: RunStatus, reason: str = "") -> RunOutcome:
            cycle = int(line.latest().values.get("cycle", 0))
            set_status(engine, record.run_id, status, reason=reason)
            outcome = RunOutcome(record.run_id, status, reason, cycle)
            progress.finished(outcome)
            return outcome

        while True:
            hook = node_started.set(progress.node_started)
            try:
                # A run id per invocation: the fork-point test runs once per invocation.
                invocation: RunnableConfig = {"recursion_limit": limit, "run_id": uuid.uuid4()}
                for node, update in line.stream(payload, context=ctx, config=invocation):
                    progress.update(node, update)
            except (ModelCallError, HookError) as error:
                # Under --debug only (a warning): the client's exception, for a bug report.
                # A hook that raised rolled its step back: fix it and resume.
                if isinstance(error, ModelCallError):
                    log.warning("the model call failed with %s", error.cause or "no exception")
                return finish("failed", error.message)
            except BadRecordError as error:
                return finish(
                    "failed",
                    f"{error}; `contreact resume {record.run_id} --skip-bad-record` "
                    "records the skip and goes on",
                )
            except KeyboardInterrupt:
                # Ctrl-C or SIGTERM: the step in flight is abandoned (what it journaled
                # replays on resume). The run stays `running` with nobody driving it, which
                # `list` and `status` show as interrupted.
                set_status(
                    engine,
                    record.run_id,
                    "running",
                    reason=f"interrupted; continue with `contreact resume {record.run_id}`",
                )
                raise
            except Exception as exc:
                if fault_of(storage, exc) is None and lease_lost(exc) is None:
                    # A storage fault is not the run's failure (`_drive` says it stopped).
                    finish("failed", f"unexpected error: {detail(exc)} (rerun with --debug)")
                raise
            finally:
                node_started.reset(hook)
            stop = line.stop()
            if stop.kind == "cycle":
                payload = None
                continue
            if stop.kind == "ended":
                return finish("completed")
            asks = operator_asks(stop.interrupts)
            if not asks:
                return finish("failed", f"the graph stopped unexpectedly before {stop.next}")
            message = str(asks[0].get("message", ""))

            def answered(up_to: int) -> int:
                return count_events(
                    engine, record.run_id, event_type=OperatorMessage.event_type, limit=up_to
                )

            try:
                answer = answer_by_policy(config.operator, message, ask_operator, answered)
            except OperatorUnavailableError as exc:
                # No console to ask on: wait in the queue rather than fail the run.
                progress.operator(message, None, "queue")
                return finish(
                    "paused", f"{exc}; answer with `contreact reply {record.run_id} TEXT`"
                )
            if answer is None:
                progress.operator(message, None, "queue")
                return finish("paused", "waiting for the operator's reply")
            progress.operator(message, answer["reply"], answer["policy"])
            payload = Command(resume=answer)


def _record_provenance(
    storage: Storage, run_id: str, ctx: Context, config: Config, occasion: str, cycle: int
) -> dict[str, Any]:
    """Record what a resume or an extension goes on with: one PROVENANCE per drive.

    The n-th drive's record has the n-th key, counted from the committed records, so a
    drive killed before its record committed leaves none, and every later drive gets one.
    """
    engine = engine_for(storage)
    n = numbered(engine, run_id, keys.provenance)

    def act(_conn: Tx) -> tuple[dict[str, Any], list[Event]]:
        record = gather(ctx, task=config.task)
        event = Provenance(occasion=occasion, provenance=record)
        return record, [Event(cycle, keys.provenance(n), event)]

    return Ledger(storage, run_id, engine).once(keys.provenance(n), cycle, act)


def _missing_tools(engine: Engine, run_id: str, names: Sequence[str]) -> list[str]:
    """The run's own tools (its EXTENSIONS event) that are not among `names`."""
    recorded = payload_of(engine, run_id, keys.EXTENSIONS)
    had = [str(t.get("name")) for t in (recorded or {}).get("tools", [])]
    return [name for name in had if name not in names]


def _starting_point(
    latest: Latest,
    record: RunRecord,
    config: Config,
    storage: Storage,
    extension: tuple[int, str | None] | None,
) -> tuple[AgentState | None, Any]:
    """The state to continue from (None: no checkpoint yet) and the input to invoke with.

    A run killed before its first checkpoint has no state and starts from its first
    input. A completed run is only continued when extended: its next cycle is opened by
    invoking the finished thread with that cycle's starting state.
    """
    if not latest.values:
        return None, _first_input(record, config, storage)
    state = AgentState(**latest.values)
    if latest.next or state.status != "completed":
        return state, None
    if extension is None:
        raise RunAlreadyCompletedError(record.run_id)
    more, opening = extension
    last = state.last_cycle + more
    set_status(
        engine_for(storage), record.run_id, "running", config={**record.config, "cycles": last}
    )
    advisory = _advisory_after(storage, record.run_id, state.cycle)
    return state, {**fresh_cycle(state.cycle + 1, advisory, opening), "last_cycle": last}


def operator_asks(interrupts: tuple[Any, ...]) -> list[dict[str, Any]]:
    """The operator messages among the values a thread is paused on."""
    return [i for i in interrupts if isinstance(i, dict) and i.get("type") == OPERATOR_INTERRUPT]


def _advisory_after(storage: Storage, run_id: str, cycle: int) -> str | None:
    """The diversity advisory that cycle `cycle` left for the next one."""
    records = cycle_records(engine_for(storage), run_id, since=cycle, before=cycle + 1)
    return records[0].advisory if records else None
