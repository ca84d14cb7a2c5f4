"""Who answers the agent's `send_message_to_operator`: the run's operator policy.

The tool only pauses the graph (`tools.operator`); the face that drives the run decides
what happens next. `auto` answers at once from the config, `terminal` asks a person on
the console the face provides, `queue` leaves the run paused until `contreact reply`.
Kept apart from the runner so the policy reads in one place and is tested as such.
"""

from __future__ import annotations

from collections.abc import Callable

from contreact.config.sections import OperatorSettings
from contreact.errors import OperatorUnavailableError

AskOperator = Callable[[str], str]
"""How the `terminal` policy asks a person: the agent's message in, the typed reply out."""


def answer(
    settings: OperatorSettings,
    message: str,
    ask_operator: AskOperator | None,
    answered: Callable[[int], int],
) -> dict[str, str] | None:
    """The reply by the run's operator policy; None leaves the run paused (queue).

    Args:
        settings: The run's `operator` settings.
        message: What the agent wrote to the operator.
        ask_operator: The console prompt of the face driving the run (None: no console).
        answered: Counts the run's earlier operator messages, up to its argument, so
            replies from a list are handed out in order, also across resumes.

    Returns:
        `{"reply", "policy"}` (the resume value the operator tool logs), or None.

    Raises:
        OperatorUnavailableError: `terminal` with no console to ask on.
    """
    if settings.mode == "auto":
        return {"reply": settings.auto_reply(answered), "policy": "auto"}
    if settings.mode == "terminal":
        if ask_operator is None:
            raise OperatorUnavailableError("operator mode 'terminal' has no console to ask on")
        return {"reply": ask_operator(message), "policy": "terminal"}
    return None
