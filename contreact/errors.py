"""Errors the face turns into one line and an exit code, kept free of heavy imports.

The CLI imports these at start-up for its error handling; keeping them here (rather than
beside the runner, which pulls in LangGraph) lets read-only commands start fast.
"""

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
