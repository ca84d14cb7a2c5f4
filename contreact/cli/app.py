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
import inspect
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, ParamSpec

import typer
from rich.console import Console

from contreact.cli.hints import TAKING_STORAGE, runnable
from contreact.errors import LINE_LIMIT, detail, is_error, known_error
from contreact.text.messages import cut
from contreact.text.terminal import visible

if TYPE_CHECKING:
    from contreact.checkpoints.storage import Storage
    from contreact.checkpoints.storage_faults import StorageFault
    from contreact.engine.outcome import RunOutcome

app = typer.Typer(
    name="contreact",
    help="Continuous ReAct agents on local Ollama models, as a LangGraph state machine. "
    "Every command that reads or writes runs takes --storage DIR|URL after its name "
    "(default: $CONTREACT_DB_URL, else $CONTREACT_HOME or ./runs).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)

P = ParamSpec("P")


class _Options:
    data_dir: str | None = None
    db_url: str | None = None
    storage: str | None = None
    """A command's own `--storage`: a database URL or a data folder; it beats everything."""
    creates: bool = False
    """Whether the running command may create its storage (it starts runs); see `command`."""
    debug: bool = False
    resolved: Storage | None = None
    """The storage the command resolved last: the hints it prints name it (`cli.hints`)."""


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
    """Print one line on stderr (an overlong one cut) and exit."""
    message = runnable(message, OPTIONS.resolved)
    err.print(visible(cut(f"contreact: {message}", LINE_LIMIT)), markup=False)
    raise typer.Exit(code)


def explain(exc: Exception) -> tuple[str, int] | None:
    """The line and exit code for an error a user can act on (None: an unexpected one)."""
    if isinstance(exc, BadInputError):
        return str(exc), 2
    return known_error(exc, lambda: storage().shown)


def quiet_broken_pipe() -> NoReturn:
    """The reader went away (`| head`): stop quietly with status 0.

    Later writes, and the interpreter's final flush, go to /dev/null instead of raising
    again (Python's documented recipe for SIGPIPE).
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    raise typer.Exit(0)


StorageOpt = Annotated[
    str | None,
    typer.Option(
        "--storage",
        help="Where the runs are: a database URL (postgresql+psycopg://..., sqlite:///FILE) "
        "or a data folder. Default: the config's `storage`, $CONTREACT_DB_URL, "
        "$CONTREACT_HOME or ./runs.",
    ),
]


_MISPLACED = {"misplaced_data_dir": "--data-dir", "misplaced_db_url": "--db-url"}
"""The old global storage flags, as a command's hidden options: given after a command's
name they are refused with a line naming `--storage`, not click's "No such option"."""


def _misplaced(flag: str) -> Any:
    return Annotated[str | None, typer.Option(flag, hidden=True)]


def command(
    name: str | None = None, *, touches_runs: bool = True, creates: bool = False
) -> Callable[[Callable[P, object]], Callable[P, None]]:
    """Register the decorated function as a `contreact` command whose body runs `guarded`.

    typer reads the command's arguments, options and help from the function's signature
    and docstring, which `functools.wraps` hands on unchanged. A command that touches runs
    also gets the one `--storage` option, so `contreact list --storage URL` works as
    `contreact --db-url URL list` does; `--data-dir` or `--db-url` after its name is
    refused with a line that names `--storage`.

    Args:
        name: The command's name (default: the function's name).
        touches_runs: Whether the command reads or writes runs (it then takes `--storage`).
        creates: Whether it starts runs, and so may create a storage that does not exist
            yet. Every other command reads or changes runs that exist: pointed at a storage
            that does not exist, it says so and creates nothing (`Storage.create`).
    """

    def register(function: Callable[P, object]) -> Callable[P, None]:
        called = name or function.__name__.replace("_", "-")

        @functools.wraps(function)
        def run_guarded(*args: P.args, **kwargs: P.kwargs) -> None:
            chosen = kwargs.pop(_STORAGE_PARAM, None)
            if chosen is not None:
                OPTIONS.storage = str(chosen)
            OPTIONS.creates = creates
            given = [flag for param, flag in _MISPLACED.items() if kwargs.pop(param, None)]
            if given:
                guarded(lambda: _refuse_misplaced(called, given[0]))
            guarded(lambda: function(*args, **kwargs))

        if touches_runs:
            TAKING_STORAGE.add(called)
            signature = inspect.signature(function, eval_str=True)
            extra = [
                inspect.Parameter(
                    param, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=annotation
                )
                for param, annotation in [
                    (_STORAGE_PARAM, StorageOpt),
                    *((param, _misplaced(flag)) for param, flag in _MISPLACED.items()),
                ]
            ]
            run_guarded.__signature__ = signature.replace(  # type: ignore[attr-defined]
                parameters=[*signature.parameters.values(), *extra]
            )
        app.command(name=name)(run_guarded)
        return run_guarded

    return register


_STORAGE_PARAM = "storage_option"


def _refuse_misplaced(command_name: str, flag: str) -> NoReturn:
    raise BadInputError(
        f"{command_name} takes the storage as --storage DIR|URL (a data folder or a database "
        f"URL), not {flag}"
    )


def guarded(action: Callable[[], object]) -> None:
    """Run a command body, turning known errors into one line and an exit code."""
    try:
        try:
            action()
        finally:
            close_databases()
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
        fail(f"unexpected error: {detail(exc)} (rerun with --debug for the traceback)", 1)


def close_databases() -> None:
    """Close the databases the command opened, before its process exits.

    Left to the interpreter's exit, a SQLite file's write-ahead log survived the command
    whenever another process had the file open (see `checkpoints.engines.dispose_engines`).
    A command that never touched the database layer has not loaded it, and skips this.
    """
    engines = sys.modules.get("contreact.checkpoints.engines")
    if engines is not None:
        engines.dispose_engines()


def _storage_fault(exc: Exception) -> StorageFault | None:
    """`exc` as a one-line database or disk fault, if it is one."""
    if is_error(exc, "contreact.checkpoints.storage_faults", "StorageFault"):
        return exc  # type: ignore[return-value]
    from contreact.checkpoints.engines import fault_of

    try:
        return fault_of(storage(), exc)
    except Exception:  # noqa: BLE001 - no storage to name: not a storage fault to tell
        return None


MANY = 2**31 - 1
"""The end of an open cycle range (`--cycles 9000-`): the largest cycle number a database
column holds (PostgreSQL's INTEGER); larger numbers given are taken as this one."""


def cycle_span(text: str) -> tuple[int, int]:
    """`A-B`, `A-` or `N` as an inclusive range of cycle numbers (1 or more, A <= B)."""
    first, dash, last = text.strip().partition("-")
    try:
        low = int(first)
        high = (int(last) if last.strip() else MANY) if dash else low
    except ValueError:
        raise BadInputError(f"--cycles takes A-B, A- or N (cycle numbers), got {text!r}") from None
    if not 1 <= low <= high:
        raise BadInputError(f"--cycles {text}: a range starts at 1 or later and ends after it")
    return min(low, MANY), min(high, MANY)


def storage(config_dir: str | None = None, config_url: str | None = None) -> Storage:
    """The storage: `--storage`, then the global flags and $CONTREACT_DB_URL, then the config.

    Without any of them it is the SQLite file in $CONTREACT_HOME or ./runs. A `--storage`
    that names a folder means that folder's SQLite file, whatever $CONTREACT_DB_URL says.
    Only a command that starts runs may create it (see `command`).
    """
    from contreact.checkpoints.locations import DB_FILENAME
    from contreact.checkpoints.storage import resolve_storage

    data_dir, url = OPTIONS.data_dir or config_dir, OPTIONS.db_url or config_url
    if OPTIONS.storage and "://" in OPTIONS.storage:
        url = OPTIONS.storage
    elif OPTIONS.storage:
        folder = Path(OPTIONS.storage).expanduser().resolve()
        data_dir, url = str(folder), f"sqlite:///{folder / DB_FILENAME}"
    try:
        found = resolve_storage(data_dir, url, create=OPTIONS.creates)
    except ValueError as exc:
        raise BadInputError(str(exc)) from None
    OPTIONS.resolved = found
    return found


def sqlite_folder(config_dir: str | None = None, config_url: str | None = None) -> Path | None:
    """The data folder when the storage is its SQLite file (None: a database URL).

    Decided as `storage` decides it, without loading the database layer, so commands that
    only peek at a SQLite file start fast.
    """
    from contreact.checkpoints import peek

    if OPTIONS.storage:
        return None if "://" in OPTIONS.storage else Path(OPTIONS.storage).expanduser().resolve()
    return peek.sqlite_folder(OPTIONS.data_dir or config_dir, OPTIONS.db_url or config_url)


def finish(outcome: RunOutcome) -> NoReturn:
    """Exit with the run's outcome code (a failure's one line goes to stderr)."""
    line = outcome.failure_line()
    if line is not None:
        line = runnable(line, OPTIONS.resolved)
        err.print(visible(cut(f"contreact: {line}", LINE_LIMIT)), markup=False)
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
    # Before `--storage` these chose the storage; kept for scripts that use them, and hidden:
    # the one storage flag shown is each command's own `--storage`.
    data_dir: Annotated[str | None, typer.Option("--data-dir", hidden=True)] = None,
    db_url: Annotated[
        str | None, typer.Option("--db-url", envvar="CONTREACT_DB_URL", hidden=True)
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
    OPTIONS.storage = None  # a command's own --storage sets it (after this callback)
    OPTIONS.resolved = None
    if "@" in os.environ.get("OLLAMA_HOST", ""):
        # Credentials in OLLAMA_HOST reach every command's requests to that host (a run's
        # recorded host, `pei`, `report`), though they are never recorded with a run.
        from contreact.ollama.hosts import default_ollama_host

        default_ollama_host()
    logging.basicConfig(level=logging.WARNING if debug else logging.ERROR, format="%(message)s")
    # A run whose traces cannot reach their collector says so, once, without --debug.
    logging.getLogger("contreact.tracing").setLevel(logging.WARNING)
