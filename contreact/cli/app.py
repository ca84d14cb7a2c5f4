"""The typer application and what every command shares: options, error lines, exit codes.

Exit codes: 0 done, 1 run failed, 2 bad input or config, 3 paused waiting for the
operator. Every error is one clear line on stderr; `--debug` adds the traceback.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, NoReturn, TypeVar

import typer
from rich.console import Console

from checkpoints.db import Storage, resolve_storage
from checkpoints.registry import RunExistsError, RunNotFoundError
from contreact.config import ConfigError
from contreact.errors import NotWaitingError, OperatorUnavailableError, RunAlreadyCompletedError

if TYPE_CHECKING:
    from contreact.runner import RunOutcome

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
    except NotWaitingError as exc:
        fail(f"run {exc} is not waiting for the operator (see `contreact operator`)", 2)
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
        raise OperatorUnavailableError("operator mode 'terminal' found no interactive console")
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
    die_with_parent()
    logging.basicConfig(level=logging.WARNING if debug else logging.ERROR, format="%(message)s")


def die_with_parent() -> None:
    """In a batch's child: be killed when the batch process dies (Linux), never orphaned."""
    parent = os.environ.get("CONTREACT_PARENT_PID")
    if not parent or not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    pr_set_pdeathsig = 1
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)
    except OSError:
        return
    if os.getppid() != int(parent):
        # The batch died before the signal was armed.
        os._exit(1)
