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
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, Protocol

from langchain_core.runnables import RunnableConfig
from langgraph.types import Command
from sqlalchemy import Engine

from contreact.checkpoints import keys
from contreact.checkpoints.cycles import cycle_records
from contreact.checkpoints.engines import engine_for, fault_of
from contreact.checkpoints.events import (
    Event,
    HostChange,
    OperatorMessage,
    Provenance,
    RunFork,
    count_events,
    numbered,
    payload_of,
)
from contreact.checkpoints.fencing import lease_lost
from contreact.checkpoints.fork import fork_run_history
from contreact.checkpoints.journal import BadRecordError, Ledger, skip_bad_records
from contreact.checkpoints.persistence import Checkpointed, Latest, open_run
from contreact.checkpoints.registry import (
    Heartbeat,
    RunRecord,
    RunStatus,
    create_run,
    get_run,
    list_runs,
    set_status,
)
from contreact.checkpoints.statistics import Statistics
from contreact.checkpoints.storage import Storage
from contreact.checkpoints.storage_faults import StorageFault
from contreact.checkpoints.transactions import Tx
from contreact.config import (
    Config,
    apply_overrides,
    deep_merge,
    default_ollama_host,
    parse_config,
)
from contreact.engine.replies import Waiting, post_reply, recorded_reply, waiting_in
from contreact.errors import (
    LeaseLostError,
    OperatorUnavailableError,
    RunAlreadyCompletedError,
    detail,
)
from contreact.graph.state import AgentState, Context, fresh_cycle
from contreact.graph.wiring import builder, recursion_limit
from contreact.nodes.hooks import HookError, extensions_of
from contreact.nodes.ollama_client import ModelCallError
from contreact.nodes.provenance import gather
from contreact.nodes.step import node_started
from contreact.operator_policy import AskOperator
from contreact.operator_policy import answer as answer_by_policy
from contreact.tools.custom import ExtensionError
from contreact.tools.operator import OPERATOR_INTERRUPT

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

    def node_started(self, node: str) -> None:
        """A node began."""

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

    def node_started(self, node: str) -> None:
        """Show nothing."""

    def update(self, node: str, update: dict[str, Any]) -> None:
        """Show nothing."""

    def operator(self, message: str, reply: str | None, policy: str) -> None:
        """Show nothing."""

    def finished(self, outcome: RunOutcome) -> None:
        """Show nothing."""


def config_of(record: RunRecord, overrides: dict[str, Any] | None = None) -> Config:
    """The run's stored config, with CLI overrides (`model`, `host`) applied.

    A run keeps the host it was registered with (runs from before hosts were pinned
    stored `ollama.host: null`); only `--host` moves it.
    """
    # The recorded host never holds credentials; resolving OLLAMA_HOST remembers any it
    # carries for this process (`contreact.host_credentials`), as `--host` would.
    default_ollama_host()
    stored = record.config
    ollama = stored.get("ollama") or {}
    if not ollama.get("host") and not ollama.get("hosts") and record.host:
        stored = {**stored, "ollama": {**ollama, "host": record.host}}
    return parse_config(apply_overrides(stored, overrides or {}), f"run {record.run_id}")


Handed = Mapping[str, Sequence[Any]]
"""Tools and hooks handed over from Python: `{"tools": [...], "hooks": [...]}`."""


def start_run(
    config: Config,
    storage: Storage,
    *,
    progress: Progress | None = None,
    ask_operator: AskOperator | None = None,
    handed: Handed | None = None,
) -> RunOutcome:
    """Register a new run and drive it to completion, a pause or a failure.

    Args:
        config: The run's config.
        storage: Where it lives.
        progress: Where to report progress.
        ask_operator: How the terminal policy asks a person.
        handed: Tools and hooks as Python objects (`contreact.run`), beside the config's.

    Raises:
        RunExistsError: the run id is taken (the caller suggests `resume`).
        ExtensionError: a tool or hook cannot be loaded (nothing is registered).
    """
    config = config.pinned()
    extensions_of(_context(config, storage, handed))
    record = create_run(
        engine_for(storage),
        config.run_id,
        model=config.model,
        host=config.host,
        config=config.model_dump(mode="json"),
        batch=config.batch,
    )
    return _drive(record, config, storage, None, progress, ask_operator, handed=handed)


def _context(config: Config, storage: Storage, handed: Handed | None) -> Context:
    """The context that executes `config` on `storage`, with the Python-handed extensions."""
    ctx = Context.of(config, storage)
    return ctx.model_copy(update={"extensions": dict(handed)}) if handed else ctx


def resume_run(
    run_id: str,
    storage: Storage,
    *,
    extra_cycles: int | None = None,
    opening: str | None = None,
    reply: str | None = None,
    overrides: dict[str, Any] | None = None,
    progress: Progress | None = None,
    ask_operator: AskOperator | None = None,
    skip_bad_record: bool = False,
    handed: Handed | None = None,
) -> RunOutcome:
    """Continue a run from its last checkpoint; `extra_cycles` extends a finished run.

    Args:
        run_id: The run.
        storage: Where it lives.
        extra_cycles: Cycles to add to a completed run.
        opening: The first added cycle's opening user turn (a chat turn), instead of the
            `user_turn` template.
        reply: The operator's answer to the message the run is paused on (queue mode).
        overrides: CLI overrides of the stored config (`model`, `host`).
        progress: Where to report progress.
        ask_operator: How the terminal policy asks a person.
        skip_bad_record: A journaled result its step cannot replay is replaced by the
            step's stand-in (a model answer: an empty one) and the skip is recorded as a
            RECORD_SKIPPED event; without it such a record fails the run, naming it.
        handed: Tools and hooks as Python objects (`contreact.run`), beside the config's.

    Raises:
        RunNotFoundError: no such run.
        RunAlreadyCompletedError: the run is complete and no extension was asked for.
        NotWaitingError: a reply was given but the run is not waiting for one.
        AlreadyAnsweredError: another reply to the message was recorded first.
    """
    engine = engine_for(storage)
    record = get_run(engine, run_id)
    if record.status == "running" and record.driven and record.pid != os.getpid():
        raise RuntimeError(
            f"run {run_id} is being driven by process {record.pid}; stop it before resuming"
        )
    if reply is not None:
        # Recorded first, as every face records one: a reply sent meanwhile from elsewhere
        # is refused, and the drive below takes this one from the record.
        post_reply(storage, run_id, reply)
        record = get_run(engine, run_id)
    config = config_of(record, overrides)
    if config.host != record.host:
        n = numbered(engine, run_id, keys.host_change)
        Ledger(storage, run_id, engine).emit(
            Event(0, keys.host_change(n), HostChange(from_=record.host, to=config.host))
        )
    if config.model_dump(mode="json") != record.config:
        set_status(
            engine,
            run_id,
            record.status,
            reason=record.reason,
            config=config.model_dump(mode="json"),
            model=config.model,
            host=config.host,
        )
    extension = (extra_cycles, opening) if extra_cycles else None
    skipping = skip_bad_records.set(skip_bad_record)
    try:
        return _drive(
            record,
            config,
            storage,
            extension,
            progress,
            ask_operator,
            resume=True,
            handed=handed,
        )
    finally:
        skip_bad_records.reset(skipping)


def fork_run(
    source_id: str,
    storage: Storage,
    *,
    at_cycle: int,
    new_run_id: str,
    changes: dict[str, Any] | None = None,
    cycles: int | None = None,
    progress: Progress | None = None,
    ask_operator: AskOperator | None = None,
) -> RunOutcome:
    """Branch `source_id` from the end of cycle `at_cycle` into a new run, and drive it.

    The fork starts with the source's reflections, events and memory as they were at the
    end of that cycle, under the source's config with `changes` applied (another model,
    say); the source is only read.

    Args:
        source_id: The run to branch.
        storage: Where both runs live.
        at_cycle: The last cycle the fork shares with the source.
        new_run_id: The fork's run id.
        changes: Config values to change in the fork (nested mappings merge).
        cycles: The fork's total number of cycles (default: the source's, at least one more).
        progress: Where to report progress.
        ask_operator: How the terminal policy asks a person.

    Raises:
        RunNotFoundError: no such source run.
        RunExistsError: `new_run_id` is taken.
        ValueError: the source has not completed cycle `at_cycle`.
    """
    engine = engine_for(storage)
    source = get_run(engine, source_id)
    done = [r.cycle for r in cycle_records(engine, source_id)]
    if at_cycle < 1 or at_cycle not in done:
        raise ValueError(
            f"run {source_id} has completed cycles {done[0] if done else 0}-"
            f"{done[-1] if done else 0}; cannot fork at cycle {at_cycle}"
        )
    total = cycles if cycles is not None else max(int(source.config["cycles"]), at_cycle + 1)
    if total <= at_cycle:
        raise ValueError(f"a fork at cycle {at_cycle} needs more than {at_cycle} cycles in all")
    data = deep_merge(source.config, {**(changes or {}), "run_id": new_run_id, "cycles": total})
    config = parse_config(data, f"fork of {source_id}").pinned()
    record = create_run(
        engine,
        new_run_id,
        model=config.model,
        host=config.host,
        config=config.model_dump(mode="json"),
        parent_run_id=source_id,
        fork_cycle=at_cycle,
    )
    fork_run_history(engine, source_id, new_run_id, at_cycle)
    ctx = Context.of(config, storage)

    def branch(_conn: Tx) -> tuple[dict[str, Any], list[Event]]:
        # The fork's own record: it may run another model, on another host, later.
        record = gather(ctx, task=config.task)
        start = RunFork(
            forked_from=source_id, at_cycle=at_cycle, model=config.model, provenance=record
        )
        return record, [Event(at_cycle + 1, keys.branch_start(new_run_id), start)]

    Ledger(storage, new_run_id, engine).once(keys.branch_start(new_run_id), at_cycle + 1, branch)
    return _drive(record, config, storage, None, progress, ask_operator)


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


def _drive(
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
    # While this process drives the run it beats; once it is killed the beat stops and
    # `list`/`status` show the run as interrupted within seconds. On a PostgreSQL without
    # autovacuum it also keeps the run tables' statistics fresh (`checkpoints.statistics`).
    try:
        with Heartbeat(engine_for(storage), record.run_id), Statistics(engine_for(storage)):
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
    ctx = _context(config, storage, handed)
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
        asks = _operator_asks(line.interrupts()) if reply is not None else []
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
            asks = _operator_asks(stop.interrupts)
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


def _operator_asks(interrupts: tuple[Any, ...]) -> list[dict[str, Any]]:
    """The operator messages among the values a thread is paused on."""
    return [i for i in interrupts if isinstance(i, dict) and i.get("type") == OPERATOR_INTERRUPT]


PendingMessage = Waiting
"""An agent's message waiting for the operator's reply (`engine.replies.Waiting`)."""


def pending_operator_messages(storage: Storage) -> list[PendingMessage]:
    """The messages every paused run of this storage is waiting on, oldest first."""
    # A run started in Studio pauses without the CLI knowing: its checkpoint says so.
    return waiting_in(storage, list_runs(engine_for(storage)))


def _advisory_after(storage: Storage, run_id: str, cycle: int) -> str | None:
    """The diversity advisory that cycle `cycle` left for the next one."""
    records = cycle_records(engine_for(storage), run_id, since=cycle, before=cycle + 1)
    return records[0].advisory if records else None
