"""Errors the face turns into one line and an exit code, kept free of heavy imports.

The CLI imports these at start-up for its error handling; keeping them here (rather than
beside the runner, which pulls in LangGraph) lets read-only commands start fast.
"""


class RunAlreadyCompletedError(Exception):
    """`resume` of a completed run without `--cycles`."""


class NotWaitingError(Exception):
    """`reply` to a run that is not paused on an operator message."""


class OperatorUnavailableError(Exception):
    """The terminal policy needs a console and there is none."""


class MissingExtraError(ImportError):
    """An optional extra's packages are needed and not installed (e.g. pandas: `analysis`)."""
