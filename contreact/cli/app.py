"""The typer application and what every command shares: registration, errors, exit codes.

Exit codes: 0 done, 1 run failed, 2 bad input or config, 3 paused waiting for the
operator. Every error is one clear line on stderr; `--debug` adds the traceback. A
closed pipe (`contreact export RUN | head -1`) ends the command quietly with status 0,
as other Unix tools do.

Start-up is part of the interface: `--help`, `list` and `status` must answer at once, so
this module imports only typer and rich; the engine (LangGraph, LangChain), the config
model and the database layer are imported inside the commands that use them.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, NoReturn, ParamSpec

import typer
from rich.console import Console

from contreact.terminal_text import visible

if TYPE_CHECKING:
    from contreact.checkpoints.storage import Storage
    from contreact.checkpoints.storage_faults import StorageFault
    from contreact.runner import RunOutcome

app = typer.Typer(
    name="contreact",
    help="Continuous ReAct agents on local Ollama models, as a LangGraph state machine.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)

P = ParamSpec("P")


class _Options:
    data_dir: str | None = None
    db_url: str | None = None
    debug: bool = False


class _PipeConsole(Console):
    """rich ends the process with status 1 when a pipe closes; contreact ends quietly with 0."""

    def on_broken_pipe(self) -> None:
        """Let `guarded` end the command quietly (see `quiet_broken_pipe`)."""
        raise BrokenPipeError


OPTIONS = _Options()
out = _PipeConsole(highlight=False, soft_wrap=True)
err = _PipeConsole(stderr=True, highlight=False, soft_wrap=True)


class BadInputError(Exception):
    """The user's input cannot be used (exit 2)."""


def fail(message: str, code: int) -> NoReturn:
    """Print one line on stderr and exit."""
    err.print(visible(f"contreact: {message}"), markup=False)
    raise typer.Exit(code)


def _loaded(module: str, name: str) -> type[BaseException] | None:
    """An exception class, if its module is loaded (if not, nothing can have raised it).

    Looking the classes up lazily keeps the config model and the database layer out of
    the start-up of commands that never touch them.
    """
    found = getattr(sys.modules.get(module), name, None)
    return found if isinstance(found, type) and issubclass(found, BaseException) else None


def _is(exc: BaseException, module: str, name: str) -> bool:
    kind = _loaded(module, name)
    return kind is not None and isinstance(exc, kind)


def explain(exc: Exception) -> tuple[str, int] | None:
    """The line and exit code for an error a user can act on (None: an unexpected one)."""
    if isinstance(exc, BadInputError) or _is(exc, "contreact.config", "ConfigError"):
        return str(exc), 2
    if _is(exc, "contreact.checkpoints.run_record", "RunExistsError"):
        return f"run {exc} already exists; continue it with `contreact resume {exc}`", 2
    if _is(exc, "contreact.checkpoints.run_record", "RunNotFoundError"):
        return f"no run named {exc} in {storage().data_dir} (see `contreact list`)", 2
    if _is(exc, "contreact.errors", "RunAlreadyCompletedError"):
        return (
            f"run {exc} is already completed; extend it with `contreact resume {exc} --cycles N`",
            2,
        )
    if _is(exc, "contreact.tools.custom", "ExtensionError"):
        return str(exc), 2
    if _is(exc, "contreact.errors", "OperatorUnavailableError"):
        return str(exc), 2
    if _is(exc, "contreact.errors", "NotWaitingError"):
        return f"run {exc} is not waiting for the operator (see `contreact operator`)", 2
    return None


def quiet_broken_pipe() -> NoReturn:
    """The reader went away (`| head`): stop quietly with status 0.

    Later writes, and the interpreter's final flush, go to /dev/null instead of raising
    again (Python's documented recipe for SIGPIPE).
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    raise typer.Exit(0)


def command(
    name: str | None = None,
) -> Callable[[Callable[P, object]], Callable[P, None]]:
    """Register the decorated function as a `contreact` command whose body runs `guarded`.

    typer reads the command's arguments, options and help from the function's signature
    and docstring, which `functools.wraps` hands on unchanged.

    Args:
        name: The command's name (default: the function's name).
    """

    def register(function: Callable[P, object]) -> Callable[P, None]:
        @functools.wraps(function)
        def run_guarded(*args: P.args, **kwargs: P.kwargs) -> None:
            guarded(lambda: function(*args, **kwargs))

        app.command(name=name)(run_guarded)
        return run_guarded

    return register


def guarded(action: Callable[[], object]) -> None:
    """Run a command body, turning known errors into one line and an exit code."""
    try:
        action()
    except typer.Exit:
        raise
    except BrokenPipeError:
        quiet_broken_pipe()
    except KeyboardInterrupt:
        fail("interrupted", 130)
    except Exception as exc:
        known = explain(exc)
        if known is not None:
            fail(*known)
        if OPTIONS.debug:
            raise
        fault = _storage_fault(exc)
        if fault is not None:
            fail(str(fault), 1)
        fail(f"{type(exc).__name__}: {exc} (rerun with --debug for the traceback)", 1)


def _storage_fault(exc: Exception) -> StorageFault | None:
    """`exc` as a one-line database or disk fault, if it is one."""
    if _is(exc, "contreact.checkpoints.storage_faults", "StorageFault"):
        return exc  # type: ignore[return-value]
    from contreact.checkpoints.engines import fault_of

    try:
        return fault_of(storage(), exc)
    except Exception:  # noqa: BLE001 - no storage to name: not a storage fault to tell
        return None


def storage(config_dir: str | None = None, config_url: str | None = None) -> Storage:
    """The storage chosen by flags, then the config, then CONTREACT_HOME / ./runs."""
    from contreact.checkpoints.storage import resolve_storage

    try:
        return resolve_storage(OPTIONS.data_dir or config_dir, OPTIONS.db_url or config_url)
    except ValueError as exc:
        raise BadInputError(str(exc)) from None


def finish(outcome: RunOutcome) -> NoReturn:
    """Exit with the run's outcome code (a failure's one line goes to stderr)."""
    if outcome.status == "failed":
        line = f"contreact: run {outcome.run_id} failed: {outcome.reason}"
        err.print(visible(line), markup=False)
    raise typer.Exit(outcome.exit_code)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            number = version("contreact")
        except PackageNotFoundError:
            number = "unknown (not installed)"
        out.print(f"contreact {number}", markup=False)
        raise typer.Exit(0)


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
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
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
