"""The `contreact` command line: parse arguments, call the runner or a reader, render.

Exit codes: 0 done, 1 run failed, 2 bad input or config, 3 paused waiting for the
operator. Every error is one clear line on stderr; `--debug` adds the traceback.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, NoReturn, TypeVar

import typer
from rich.console import Console
from rich.table import Table

from checkpoints.cycles import cycle_records
from checkpoints.db import Storage, engine_for, resolve_storage
from checkpoints.events import log_path
from checkpoints.registry import RunExistsError, RunNotFoundError, get_run, list_runs
from contreact.config import ConfigError, load_config, parse_config
from contreact.progress import LineProgress
from contreact.runner import (
    OperatorUnavailableError,
    RunAlreadyCompletedError,
    RunOutcome,
    resume_run,
    start_run,
)
from tools.memory import memory_snapshot

app = typer.Typer(
    name="contreact",
    help="Continuous ReAct agents on local Ollama models, as a LangGraph state machine.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

T = TypeVar("T")


class _Options:
    data_dir: str | None = None
    db_url: str | None = None
    debug: bool = False


OPTIONS = _Options()
out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)


class BadInputError(Exception):
    """The user's input cannot be used (exit 2)."""


def fail(message: str, code: int) -> NoReturn:
    """Print one line on stderr and exit."""
    err.print(f"contreact: {message}", markup=False)
    raise typer.Exit(code)


def guarded(action: Callable[[], T]) -> T:
    """Run a command body, turning known errors into one line and an exit code."""
    try:
        return action()
    except typer.Exit:
        raise
    except (ConfigError, BadInputError) as exc:
        fail(str(exc), 2)
    except RunExistsError as exc:
        fail(f"run {exc} already exists; continue it with `contreact resume {exc}`", 2)
    except RunNotFoundError as exc:
        fail(f"no run named {exc} in {storage().data_dir} (see `contreact list`)", 2)
    except RunAlreadyCompletedError as exc:
        fail(
            f"run {exc} is already completed; extend it with `contreact resume {exc} --cycles N`", 2
        )
    except OperatorUnavailableError as exc:
        fail(str(exc), 2)
    except KeyboardInterrupt:
        fail("interrupted", 130)
    except Exception as exc:
        if OPTIONS.debug:
            raise
        fail(f"{type(exc).__name__}: {exc} (rerun with --debug for the traceback)", 1)


def storage(config_dir: str | None = None, config_url: str | None = None) -> Storage:
    """The storage chosen by flags, then the config, then CONTREACT_HOME / ./runs."""
    try:
        return resolve_storage(OPTIONS.data_dir or config_dir, OPTIONS.db_url or config_url)
    except ValueError as exc:
        raise BadInputError(str(exc)) from None


def ask_on_terminal(message: str) -> str:
    """The terminal operator policy: show the agent's message, read a reply."""
    if not sys.stdin.isatty():
        raise OperatorUnavailableError(
            "operator mode 'terminal' needs an interactive console; use mode 'queue' or 'auto'"
        )
    out.print(f"\n[bold magenta]Message from the agent:[/] {message}")
    return str(typer.prompt("Your reply"))


def finish(outcome: RunOutcome) -> NoReturn:
    """Exit with the run's outcome code (failures also get one line on stderr)."""
    if outcome.status == "failed":
        err.print(f"contreact: run {outcome.run_id} failed: {outcome.reason}", markup=False)
    raise typer.Exit(outcome.exit_code)


@app.callback()
def main_options(
    data_dir: Annotated[
        str | None,
        typer.Option("--data-dir", help="Data directory (default: $CONTREACT_HOME or ./runs)."),
    ] = None,
    db_url: Annotated[
        str | None,
        typer.Option("--db-url", envvar="CONTREACT_DB_URL", help="Database URL (PostgreSQL)."),
    ] = None,
    debug: Annotated[
        bool, typer.Option("--debug", help="Show tracebacks and retry warnings.")
    ] = False,
) -> None:
    """Continuous ReAct agents on local Ollama models."""
    OPTIONS.data_dir, OPTIONS.db_url, OPTIONS.debug = data_dir, db_url, debug
    logging.basicConfig(level=logging.WARNING if debug else logging.ERROR, format="%(message)s")


@app.command()
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

    def body() -> NoReturn:
        cfg = load_config(
            config, {"model": model, "cycles": cycles, "run_id": run_id, "host": host}
        )
        where = storage(cfg.storage.data_dir, cfg.storage.url)
        finish(
            start_run(cfg, where, progress=LineProgress(quiet=quiet), ask_operator=ask_on_terminal)
        )

    guarded(body)


@app.command()
def resume(
    run_id: Annotated[str, typer.Argument(help="The run to continue.")],
    cycles: Annotated[int | None, typer.Option(help="Extend a finished run by N cycles.")] = None,
    model: Annotated[str | None, typer.Option(help="Continue with another model.")] = None,
    host: Annotated[str | None, typer.Option(help="Continue against another Ollama host.")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q")] = False,
) -> None:
    """Continue RUN from its last checkpoint (after a crash, a failure or a pause)."""

    def body() -> NoReturn:
        if cycles is not None and cycles < 1:
            raise BadInputError("--cycles must be at least 1")
        outcome = resume_run(
            run_id,
            storage(),
            extra_cycles=cycles,
            overrides={"model": model, "host": host},
            progress=LineProgress(quiet=quiet),
            ask_operator=ask_on_terminal,
        )
        finish(outcome)

    guarded(body)


def _run_summary(run_id: str) -> dict[str, Any]:
    where = storage()
    engine = engine_for(where)
    record = get_run(engine, run_id)
    done = cycle_records(engine, run_id)
    return {
        "run_id": record.run_id,
        "status": record.status,
        "reason": record.reason,
        "model": record.model,
        "host": record.host,
        "thread_id": record.thread_id,
        "cycles_completed": len(done),
        "cycles_planned": int(record.config.get("cycles", 0)),
        "parent_run_id": record.parent_run_id,
        "fork_cycle": record.fork_cycle,
        "created_at": record.created_at,
        "updated_at": record.updated_at,
        "process_alive": record.process_alive if record.status == "running" else None,
        "log": str(log_path(where, run_id)),
    }


@app.command()
def status(
    run_id: Annotated[str, typer.Argument(help="The run.")],
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Show one run's status."""

    def body() -> None:
        summary = _run_summary(run_id)
        if as_json:
            out.print_json(json.dumps(summary))
            return
        for key, value in summary.items():
            if value not in (None, ""):
                out.print(f"{key:>17}: {value}", markup=False)

    guarded(body)


@app.command(name="list")
def list_(
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """List all runs."""

    def body() -> None:
        engine = engine_for(storage())
        rows: list[dict[str, Any]] = [
            {
                "run_id": r.run_id,
                "status": r.status,
                "model": r.model,
                "cycles": int(r.config.get("cycles", 0)),
                "created_at": r.created_at,
                "updated_at": r.updated_at,
                "reason": r.reason,
            }
            for r in list_runs(engine)
        ]
        if as_json:
            out.print_json(json.dumps(rows))
            return
        if not rows:
            out.print("No runs yet. Start one with `contreact demo` or `contreact run CONFIG`.")
            return
        table = Table("run", "status", "model", "cycles", "updated")
        for r in rows:
            table.add_row(
                *(str(r[k]) for k in ("run_id", "status", "model", "cycles", "updated_at"))
            )
        out.print(table)

    guarded(body)


@app.command()
def show(
    run_id: Annotated[str, typer.Argument(help="The run.")],
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Show a run's reflections and metrics, cycle by cycle."""

    def body() -> None:
        engine = engine_for(storage())
        get_run(engine, run_id)
        records = cycle_records(engine, run_id)
        if as_json:
            out.print_json(json.dumps([asdict(r) for r in records]))
            return
        if not records:
            out.print(f"Run {run_id} has no completed cycles yet.")
        for r in records:
            m = r.metrics
            flags = f" [{', '.join(r.flags)}]" if r.flags else ""
            out.print(f"[bold]Cycle {r.cycle}[/]{flags}")
            out.print(r.reflection or "(empty reflection)", markup=False)
            out.print(
                f"[dim]steps {m.get('steps')} · tool calls {m.get('tool_calls')} · memory ops "
                f"{m.get('memory_ops_total')} · operator {m.get('messages_to_operator')} · "
                f"tokens {m.get('tokens_in')}/{m.get('tokens_out')} · memory keys "
                f"{m.get('final_memory_keys')}"
                + (f" · similarity {r.similarity:.2f}" if r.similarity is not None else "")
                + "[/]\n"
            )

    guarded(body)


@app.command()
def memory(
    run_id: Annotated[str, typer.Argument(help="The run.")],
    as_json: Annotated[bool, typer.Option("--json", help="A JSON object key -> value.")] = False,
) -> None:
    """Show a run's memory."""

    def body() -> None:
        engine = engine_for(storage())
        get_run(engine, run_id)
        snapshot = memory_snapshot(engine, run_id)
        if as_json:
            sys.stdout.write(json.dumps(snapshot, ensure_ascii=False, indent=2) + "\n")
            return
        if not snapshot:
            out.print(f"Run {run_id} has no memories.")
            return
        table = Table("key", "value")
        for key, value in snapshot.items():
            table.add_row(key, value if len(value) < 200 else value[:199] + "…")
        out.print(table)

    guarded(body)


@app.command()
def demo(
    cycles: Annotated[int, typer.Option(help="How many cycles to run.")] = 3,
    run_id: Annotated[str | None, typer.Option("--run-id", help="Name of the demo run.")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q")] = False,
) -> None:
    """Run a short agent against the bundled Ollama stub: no Ollama needed."""
    from contreact.stub import StubServer

    def body() -> NoReturn:
        name = run_id or "demo-" + datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
        with StubServer().start() as server:
            cfg = parse_config(
                {
                    "run_id": name,
                    "model": "stub-model",
                    "cycles": cycles,
                    "ollama": {"host": server.url, "timeout_s": 30, "retries": 2},
                    "similarity": {"embedding_model": "stub-embed"},
                },
                "demo",
            )
            where = storage()
            out.print(
                f"Demo: {cycles} cycles against the bundled stub at {server.url} "
                f"(data in {where.data_dir})",
                markup=False,
            )
            outcome = start_run(cfg, where, progress=LineProgress(quiet=quiet))
        if outcome.status == "completed":
            out.print(
                f"Inspect it with: contreact show {name}   ·   contreact memory {name}",
                markup=False,
            )
        finish(outcome)

    guarded(body)


def main() -> None:
    """Console-script entry point."""
    app()
