"""Commands that start, continue and inspect runs: run, resume, status, list, show, memory, demo."""

from __future__ import annotations

from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from contreact.cli.app import (
    MANY,
    BadInputError,
    command,
    cycle_span,
    finish,
    out,
    sqlite_folder,
    storage,
)
from contreact.cli.hints import runnable
from contreact.cli.output import emit_json, emit_table
from contreact.ollama.server_numbers import number
from contreact.text.terminal import visible

if TYPE_CHECKING:
    from contreact.checkpoints.run_record import RunRecord

# The engine, the config model and the database layer are imported inside each command:
# `list` and `status` must start fast (see contreact/cli/app.py).


@command(creates=True)
def run(
    config: Annotated[Path, typer.Argument(help="YAML run configuration.")],
    model: Annotated[str | None, typer.Option(help="Override the config's model.")] = None,
    cycles: Annotated[int | None, typer.Option(help="Override the number of cycles.")] = None,
    run_id: Annotated[str | None, typer.Option("--run-id", help="Override the run id.")] = None,
    host: Annotated[str | None, typer.Option(help="Override the Ollama host.")] = None,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="Only reflections and the outcome.")
    ] = False,
) -> None:
    """Start a new run from CONFIG."""
    from contreact.cli.progress import LineProgress
    from contreact.config.files import load_config

    cfg = load_config(config, {"model": model, "cycles": cycles, "run_id": run_id, "host": host})
    _refuse_existing(cfg.storage.data_dir, cfg.storage.url, cfg.run_id)
    progress = LineProgress(quiet=quiet)
    # The first line comes before the database layer and the engine are loaded (a
    # second or so); start_run checks the run id again, under the registry's key.
    progress.announce(cfg.run_id, cfg.model)
    where = storage(cfg.storage.data_dir, cfg.storage.url)
    progress.storage = where
    from contreact.engine.runner import start_run

    finish(start_run(cfg, where, progress=progress, ask_operator=progress.ask))


def _refuse_existing(data_dir: str | None, url: str | None, run_id: str) -> None:
    """Raise `RunExistsError` before anything is announced (quickly, on SQLite)."""
    from contreact.checkpoints import peek
    from contreact.checkpoints.run_record import RunExistsError, RunNotFoundError

    folder = sqlite_folder(data_dir, url)
    try:
        if folder is None:
            raise peek.Unreadable("not the default SQLite file")
        peek.read_runs(folder, run_id)
    except RunNotFoundError:
        return
    except peek.Unreadable:
        from contreact.checkpoints.engines import engine_for
        from contreact.checkpoints.registry import get_run

        try:
            get_run(engine_for(storage(data_dir, url)), run_id)
        except RunNotFoundError:
            return
    storage(data_dir, url)  # the storage the error's hint (`resume`) must name
    raise RunExistsError(run_id)


@command()
def resume(
    run_id: Annotated[str, typer.Argument(help="The run to continue.")],
    cycles: Annotated[int | None, typer.Option(help="Extend a finished run by N cycles.")] = None,
    model: Annotated[str | None, typer.Option(help="Continue with another model.")] = None,
    host: Annotated[str | None, typer.Option(help="Continue against another Ollama host.")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q")] = False,
    skip_bad_record: Annotated[
        bool,
        typer.Option(
            "--skip-bad-record",
            help="A journaled result that cannot be replayed is skipped (recorded as an event).",
        ),
    ] = False,
) -> None:
    """Continue RUN from its last checkpoint (after a crash, a failure or a pause)."""
    from contreact.cli.progress import LineProgress
    from contreact.engine.runner import resume_run

    if cycles is not None and cycles < 1:
        raise BadInputError("--cycles must be at least 1")
    progress = LineProgress(quiet=quiet, storage=storage())
    outcome = resume_run(
        run_id,
        storage(),
        extra_cycles=cycles,
        overrides={"model": model, "host": host},
        progress=progress,
        ask_operator=progress.ask,
        skip_bad_record=skip_bad_record,
    )
    finish(outcome)


def _registry(run_id: str | None = None) -> tuple[list[RunRecord], dict[str, int], Path | None]:
    """Runs (all, or the one named), their finished-cycle counts, and their logs' folder.

    On the default SQLite file this reads with the standard library (`checkpoints.peek`),
    which keeps `list` and `status` clear of SQLAlchemy's import time; anything else goes
    through the registry. No logs' folder with a database URL: the log is in the database.
    """
    from contreact.checkpoints import peek

    folder = sqlite_folder()
    found: tuple[list[RunRecord], dict[str, int], Path | None] | None = None
    if folder is not None:
        try:
            read = peek.read_runs(folder, run_id), peek.cycle_counts(folder, run_id)
            found = (*read, folder / "logs")
        except peek.Unreadable:
            pass
    if found is None:
        from contreact.checkpoints.cycles import cycle_records
        from contreact.checkpoints.engines import engine_for
        from contreact.checkpoints.registry import get_run, list_runs

        where = storage()
        engine = engine_for(where)
        records = list_runs(engine) if run_id is None else [get_run(engine, run_id)]
        counts = {r.run_id: len(cycle_records(engine, r.run_id)) for r in records}
        found = records, counts, where.logs_dir if where.is_sqlite else None
    records, counts, logs = found
    return _studio_pauses(records), counts, logs


def _studio_pauses(records: list[RunRecord]) -> list[RunRecord]:
    """The records, with a run begun in Studio and waiting on the operator shown `paused`.

    Studio drives its runs itself and leaves them `running` in the registry; whether one
    waits on the operator is in its checkpoint (read only when there is such a run).
    """
    if not any(r.origin == "studio" and r.status == "running" for r in records):
        return records
    import dataclasses

    from contreact.engine.inbox import pending_operator_messages

    waiting = {p.run_id for p in pending_operator_messages(storage())}
    return [
        dataclasses.replace(r, status="paused")
        if r.origin == "studio" and r.status == "running" and r.run_id in waiting
        else r
        for r in records
    ]


def _runnable(line: str) -> str:
    """`line` with its suggested commands completed with the storage (`cli.hints`).

    The storage is resolved only for a line that suggests one: `status` stays fast.
    """
    return runnable(line, storage()) if "`contreact " in line else line


def _run_summary(run_id: str) -> dict[str, Any]:
    (record,), counts, logs = _registry(run_id)
    return {
        "run_id": record.run_id,
        "status": record.shown_status,
        "reason": _runnable(
            f"the process driving it stopped; continue with `contreact resume {run_id}`"
            if record.shown_status == "interrupted"
            else record.reason
        ),
        "model": record.model,
        "host": record.host,
        "thread_id": record.thread_id,
        "cycles_completed": counts.get(run_id, 0),
        "cycles_planned": int(record.config.get("cycles", 0)),
        "seed": (record.config.get("model_options") or {}).get("seed"),
        "batch": record.batch,
        "parent_run_id": record.parent_run_id,
        "fork_cycle": record.fork_cycle,
        "created_at": record.created_at,
        "updated_at": record.updated_at,
        "process_alive": record.driven if record.status == "running" else None,
        "activity": _activity(record),
        "log": None if logs is None else str(logs / f"{run_id}.jsonl"),  # as event_mirror's
    }


def _activity(record: RunRecord) -> str | None:
    """`in tool `slow_tool` for 42 s` while the run's driver is inside a tool of its own."""
    inside = record.tool_seconds() if record.shown_status == "running" else None
    if inside is None:
        return None
    tool, seconds = inside
    return f"in tool `{tool}` for {seconds:.0f} s"


@command()
def status(
    run_id: Annotated[str, typer.Argument(help="The run.")],
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Show one run's status."""
    summary = _run_summary(run_id)
    if as_json:
        emit_json(summary)
        return
    for key, value in summary.items():
        if value not in (None, ""):
            out.print(f"{key:>17}: {visible(value)}", markup=False)


@command(name="list")
def list_(
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """List all runs."""
    records, counts, _ = _registry()
    rows: list[dict[str, Any]] = [
        {
            "run_id": r.run_id,
            "status": r.shown_status,
            "origin": r.origin,
            "model": r.model,
            "cycles_done": counts.get(r.run_id, 0),
            "cycles_planned": int(r.config.get("cycles", 0)),
            "created_at": r.created_at,
            "updated_at": r.updated_at,
            "reason": r.reason,
        }
        for r in records
    ]
    if as_json:
        emit_json(rows)
        return
    if not rows:
        out.print(
            _runnable("No runs yet. Start one with `contreact demo` or `contreact run CONFIG`.")
        )
        return
    emit_table(
        ["run", "status", "origin", "model", "cycles", "updated"],
        [
            [
                r["run_id"],
                r["status"],
                r["origin"],
                r["model"],
                f"{r['cycles_done']}/{r['cycles_planned']}",
                r["updated_at"],
            ]
            for r in rows
        ],
    )


def _shown(value: object) -> str:
    """A recorded count as `show` prints it: through the server-number check, `?` if absent."""
    checked = number(value)
    return (
        "?" if checked is None else f"{checked:g}" if isinstance(checked, float) else str(checked)
    )


@command()
def show(
    run_id: Annotated[str, typer.Argument(help="The run.")],
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
    cycles: Annotated[
        str | None, typer.Option("--cycles", help="Only cycles A-B (or A-, or N).")
    ] = None,
) -> None:
    """Show a run's reflections and metrics, cycle by cycle."""
    from contreact.checkpoints.cycles import iter_cycle_records
    from contreact.checkpoints.engines import engine_for
    from contreact.checkpoints.registry import get_run

    span = cycle_span(cycles) if cycles is not None else (1, MANY)
    engine = engine_for(storage())
    get_run(engine, run_id)
    # Streamed: a 10,000-cycle run is printed as it is read, never held whole.
    before = None if span[1] >= MANY else span[1] + 1
    records = iter_cycle_records(engine, run_id, since=span[0], before=before)
    if as_json:
        emit_json([asdict(r) for r in records])
        return
    shown = 0
    for r in records:
        shown += 1
        m = r.metrics
        flags = escape(visible(f" [{', '.join(r.flags)}]")) if r.flags else ""
        out.print(f"[bold]Cycle {r.cycle}[/]{flags}")
        out.print(visible(r.reflection or "(empty reflection)"), markup=False)
        out.print(
            f"[dim]steps {m.get('steps')} · tool calls {m.get('tool_calls')} · memory ops "
            f"{m.get('memory_ops_total')} · operator {m.get('messages_to_operator')} · "
            f"tokens {_shown(m.get('tokens_in'))}/{_shown(m.get('tokens_out'))} · memory keys "
            f"{m.get('final_memory_keys')}"
            + (f" · similarity {r.similarity:.2f}" if r.similarity is not None else "")
            + "[/]\n"
        )
    if not shown:
        where = "" if cycles is None else f" in cycles {cycles}"
        out.print(f"Run {run_id} has no completed cycles{where} yet.", markup=False)


@command()
def memory(
    run_id: Annotated[str, typer.Argument(help="The run.")],
    as_json: Annotated[bool, typer.Option("--json", help="A JSON object key -> value.")] = False,
) -> None:
    """Show a run's memory."""
    from contreact.checkpoints.engines import engine_for
    from contreact.checkpoints.registry import get_run
    from contreact.tools.memory import memory_snapshot

    engine = engine_for(storage())
    get_run(engine, run_id)
    snapshot = memory_snapshot(engine, run_id)
    if as_json:
        emit_json(snapshot)
        return
    if not snapshot:
        out.print(f"Run {run_id} has no memories.")
        return
    # On a terminal long values are cut to keep the table readable; a pipe gets them whole.
    limit = 200 if out.is_terminal else None
    emit_table(
        ["key", "value"],
        [
            [key, value if limit is None or len(value) < limit else value[: limit - 1] + "…"]
            for key, value in snapshot.items()
        ],
    )


@command(creates=True)
def demo(
    cycles: Annotated[int, typer.Option(help="How many cycles to run.")] = 3,
    run_id: Annotated[str | None, typer.Option("--run-id", help="Name of the demo run.")] = None,
    model: Annotated[
        str | None,
        typer.Option(
            help="A real model behind the stub: gemma3:270m, smollm2:135m or a GGUF path "
            "(needs the 'real' extra)."
        ),
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q")] = False,
) -> None:
    """Run a short agent against the bundled Ollama stub: no Ollama needed."""
    from contreact.cli.progress import LineProgress
    from contreact.config import parse_config
    from contreact.engine.runner import start_run
    from contreact.stub import StubServer

    name = run_id or "demo-" + datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    with _demo_server(model) if model else StubServer().start() as server:
        settings = real_demo_settings(server.models()[0]) if model else _SCRIPTED_DEMO
        cfg = parse_config(
            {
                "run_id": name,
                "cycles": cycles,
                **settings,
                "ollama": {**settings["ollama"], "host": server.url},
            },
            "demo",
        )
        where = storage()
        against = f"the real model {cfg.model}" if model else "the bundled stub"
        out.print(
            f"Demo: {cycles} cycles against {against} at {server.url} (data in {where.data_dir})",
            markup=False,
        )
        outcome = start_run(cfg, where, progress=LineProgress(quiet=quiet, storage=where))
    if outcome.status == "completed":
        out.print(
            runnable(
                f"Inspect it with `contreact show {name}` and `contreact memory {name}`", where
            ),
            markup=False,
        )
    finish(outcome)


_SCRIPTED_DEMO: dict[str, Any] = {
    "model": "stub-model",
    "ollama": {"timeout_s": 30, "retries": 2},
    "similarity": {"embedding_model": "stub-embed"},
}


def real_demo_settings(model: str) -> dict[str, Any]:
    """The demo's config for a real small model on CPU (also the real test tier's).

    Answers are capped (`num_predict`) and cycles kept to a few steps: a base model runs
    every answer to the cap, and on two cores a step takes seconds, not milliseconds.
    Tools go as text (`auto`: the model has no `tools` capability); similarity is lexical.
    """
    return {
        "model": model,
        "ollama": {"timeout_s": 300, "retries": 1},
        "model_options": {"num_predict": 192},
        "limits": {"max_steps_per_cycle": 4, "max_tool_calls_per_cycle": 6},
        "tools": "auto",
    }


def _demo_server(model: str) -> Any:
    """The stub serving a real model, started; one line saying how to get the extra if missing."""
    from contreact.stub.real import MissingExtraError, build_real_server

    try:
        return build_real_server(model).start()
    except (MissingExtraError, FileNotFoundError) as exc:
        raise BadInputError(str(exc)) from None


@command()
def fork(
    run_id: Annotated[str, typer.Argument(help="The run to branch.")],
    cycle: Annotated[int, typer.Option("--cycle", help="Branch from the end of this cycle.")],
    new_run_id: Annotated[str, typer.Option("--as", help="The new run's id.")],
    model: Annotated[str | None, typer.Option(help="Continue the branch with this model.")] = None,
    cycles: Annotated[int | None, typer.Option(help="The branch's total cycles.")] = None,
    no_interventions: Annotated[
        bool,
        typer.Option(
            "--no-interventions", help="Drop the config's interventions (kept by default)."
        ),
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q")] = False,
) -> None:
    """Branch RUN from the end of a cycle into a new run (the original is untouched), and run it."""
    from contreact.cli.progress import LineProgress
    from contreact.engine.runner import fork_run

    changes: dict[str, Any] = {"model": model} if model else {}
    if no_interventions:
        changes["interventions"] = []
    progress = LineProgress(quiet=quiet, storage=storage())
    try:
        outcome = fork_run(
            run_id,
            storage(),
            at_cycle=cycle,
            new_run_id=new_run_id,
            changes=changes,
            cycles=cycles,
            progress=progress,
            ask_operator=progress.ask,
        )
    except ValueError as exc:
        raise BadInputError(str(exc)) from None
    finish(outcome)
