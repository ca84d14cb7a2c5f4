"""Start, resume and extend runs: compile the graph with a saver, drive it, answer interrupts.

This is the one place that turns a config into a running graph. It registers the run,
compiles `graph.builder` over the storage's checkpointer, invokes it with
`durability="sync"` (a kill -9 loses at most the model call in flight), answers operator
interrupts according to the run's policy, and records the outcome in the registry. It
never prints: progress goes to a `Progress` the face provides, and the terminal policy
asks the face's `ask_operator` callback.
"""

from __future__ import annotations

import os
from typing import Any

from contreact.checkpoints import keys
from contreact.checkpoints.cycles import cycle_records
from contreact.checkpoints.engines import engine_for
from contreact.checkpoints.event_schema import Event, HostChange, RunFork
from contreact.checkpoints.event_store import numbered
from contreact.checkpoints.fork import fork_run_history
from contreact.checkpoints.journal import Ledger, skip_bad_records
from contreact.checkpoints.registry import (
    RunRecord,
    create_run,
    get_run,
    set_status,
)
from contreact.checkpoints.storage import Storage
from contreact.checkpoints.transactions import Tx
from contreact.config import Config, parse_config
from contreact.config.files import apply_overrides, deep_merge
from contreact.engine.drive import Handed, context_of, drive
from contreact.engine.operator_policy import AskOperator
from contreact.engine.outcome import Progress, RunOutcome
from contreact.engine.replies import post_reply
from contreact.extensions.loading import extensions_of
from contreact.graph.state import Context
from contreact.nodes.provenance import gather
from contreact.ollama.hosts import default_ollama_host


def config_of(record: RunRecord, overrides: dict[str, Any] | None = None) -> Config:
    """The run's stored config, with CLI overrides (`model`, `host`) applied.

    A run keeps the host it was registered with (runs from before hosts were pinned
    stored `ollama.host: null`); only `--host` moves it.
    """
    # The recorded host never holds credentials; resolving OLLAMA_HOST remembers any it
    # carries for this process (`contreact.ollama.credentials`), as `--host` would.
    default_ollama_host()
    stored = record.config
    ollama = stored.get("ollama") or {}
    if not ollama.get("host") and not ollama.get("hosts") and record.host:
        stored = {**stored, "ollama": {**ollama, "host": record.host}}
    return parse_config(apply_overrides(stored, overrides or {}), f"run {record.run_id}")


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
    extensions_of(context_of(config, storage, handed))
    record = create_run(
        engine_for(storage),
        config.run_id,
        model=config.model,
        host=config.host,
        config=config.model_dump(mode="json"),
        batch=config.batch,
    )
    return drive(record, config, storage, None, progress, ask_operator, handed=handed)


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
    cycles: int | None = None,
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
        cycles: The run's total cycles (a batch whose `cycles` was raised): a run with
            fewer is continued to its own end and then extended to `cycles`; a run that has
            as many is left as it is. Asked again, it does nothing more, so a queued job
            delivered twice extends the run once.

    Raises:
        RunNotFoundError: no such run.
        RunAlreadyCompletedError: the run is complete and no extension was asked for.
        NotWaitingError: a reply was given but the run is not waiting for one.
        AlreadyAnsweredError: another reply to the message was recorded first.
    """
    if cycles is not None:
        return _resume_to(
            run_id,
            storage,
            cycles,
            overrides=overrides,
            progress=progress,
            ask_operator=ask_operator,
            skip_bad_record=skip_bad_record,
            handed=handed,
        )
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
        return drive(
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


def _resume_to(run_id: str, storage: Storage, cycles: int, **given: Any) -> RunOutcome:
    """`resume_run` to `cycles` in all: finish the run as it stands, then extend it."""
    record = get_run(engine_for(storage), run_id)
    if record.status != "completed":
        outcome = resume_run(run_id, storage, **given)
        if outcome.status != "completed":
            return outcome
        record = get_run(engine_for(storage), run_id)
    more = cycles - int(record.config.get("cycles", 0))
    if more <= 0:
        done = len(cycle_records(engine_for(storage), run_id))
        return RunOutcome(run_id, "completed", cycle=done)
    return resume_run(run_id, storage, extra_cycles=more, **given)


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
    return drive(record, config, storage, None, progress, ask_operator)
