"""Errors the face turns into one line and an exit code, kept free of heavy imports.

The CLI imports these at start-up for its error handling; keeping them here (rather than
beside the runner, which pulls in LangGraph) lets read-only commands start fast.
"""

import sys
from collections.abc import Callable

from contreact.text.messages import cut


class RunAlreadyCompletedError(Exception):
    """`resume` of a completed run without `--cycles`."""


class NotWaitingError(Exception):
    """`reply` to a run that is not paused on an operator message."""


class OperatorUnavailableError(Exception):
    """The terminal policy needs a console and there is none."""


class LeaseLostError(Exception):
    """A queued run's driver lost its lease to another worker: it writes nothing more.

    The database refused its write (`checkpoints.fencing`); the run goes on elsewhere.
    """

    def __init__(self, run_id: str, said: str) -> None:
        self.run_id = run_id
        super().__init__(
            f"run {run_id}: this process lost its lease to another worker and wrote nothing "
            f"more to the run ({said})"
        )


class StorageNotFoundError(Exception):
    """The storage a command reads does not exist, and reading never creates it.

    The message is the line: what was looked at and that nothing was created there.
    """


class MissingExtraError(ImportError):
    """An optional extra's packages are needed and not installed (e.g. pandas: `analysis`)."""


LINE_LIMIT = 1000
"""The longest error line printed whole: a pasted file or a 5,000-character run id is cut."""


def detail(exc: BaseException) -> str:
    """What an exception says, in one line and without its class name ("no detail" if mute).

    The class name means nothing to a person at a terminal; `--debug` shows it with the
    traceback.
    """
    for line in str(exc).splitlines():
        if line.strip():
            return cut(line.strip(), 300)
    return "no detail"


def _loaded(module: str, name: str) -> type[BaseException] | None:
    """An exception class, if its module is loaded (if not, nothing can have raised it).

    Looking the classes up lazily keeps the config model and the database layer out of
    the start-up of commands that never touch them.
    """
    found = getattr(sys.modules.get(module), name, None)
    return found if isinstance(found, type) and issubclass(found, BaseException) else None


def is_error(exc: BaseException, module: str, name: str) -> bool:
    """Whether `exc` is the exception class `name` of `module` (False if never loaded)."""
    kind = _loaded(module, name)
    return kind is not None and isinstance(exc, kind)


def known_error(exc: BaseException, storage_shown: Callable[[], str]) -> tuple[str, int] | None:
    """The line and exit code for an error a person can act on (None: an unexpected one).

    Args:
        exc: The error.
        storage_shown: Names the storage the command looked in (asked only when needed).
    """
    if is_error(exc, "contreact.config", "ConfigError"):
        return str(exc), 2
    run = cut(str(exc))  # the run id these errors carry, as typed
    if is_error(exc, "contreact.checkpoints.run_record", "RunExistsError"):
        return f"run {run} already exists; continue it with `contreact resume {run}`", 2
    if is_error(exc, "contreact.checkpoints.run_record", "RunNotFoundError"):
        return f"no run named {run} in {storage_shown()} (see `contreact list`)", 2
    if isinstance(exc, RunAlreadyCompletedError):
        return (
            f"run {run} is already completed; extend it with `contreact resume {run} --cycles N`",
            2,
        )
    if is_error(exc, "contreact.tools.custom", "ExtensionError"):
        return str(exc), 2
    if isinstance(exc, OperatorUnavailableError):
        return str(exc), 2
    if isinstance(exc, LeaseLostError):
        return str(exc), 1
    if isinstance(exc, StorageNotFoundError):
        return str(exc), 2
    if isinstance(exc, NotWaitingError):
        return f"run {run} is not waiting for the operator (see `contreact operator`)", 2
    if is_error(exc, "contreact.engine.replies", "AlreadyAnsweredError"):
        return f"run {run} was answered by another reply first (see `contreact show {run}`)", 2
    return None
