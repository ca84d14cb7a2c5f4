"""`send_message_to_operator`: the agent's channel to the human who hosts it.

The tool pauses the graph with LangGraph `interrupt()` and returns the reply it is
resumed with. Who answers (a console prompt, an automatic policy, a queue answered later
with `contreact reply`, or a person in LangGraph Studio) is the face's business, not the
tool's. `interrupt()` re-runs the node from the top on resume, and matches replies to
interrupts by the order they are called in, so the tool always calls it — even when the
reply is already journaled — and does nothing with side effects before it.
"""

from __future__ import annotations

from typing import Any

from langgraph.types import interrupt

from contreact.tools.memory import ToolError, ToolSession

OPERATOR_INTERRUPT = "operator_message"


def operator_request(run_id: str, cycle: int, message: str) -> dict[str, Any]:
    """The interrupt payload a face sees when the agent messages the operator."""
    return {"type": OPERATOR_INTERRUPT, "run_id": run_id, "cycle": cycle, "message": message}


def reply_text(resume: Any) -> tuple[str, str]:
    """`(reply, policy)` from a resume value: a plain string or `{"reply", "policy"}`."""
    if isinstance(resume, dict):
        return str(resume.get("reply", "")), str(resume.get("policy", "unknown"))
    return str(resume), "interactive"


def ask_operator(run_id: str, cycle: int, message: str) -> Any:
    """Pause for the operator and return the raw resume value.

    LangGraph pairs resume values with `interrupt()` calls by their order within a node
    run, so a node that skips an already-answered call must still call this for it.
    """
    return interrupt(operator_request(run_id, cycle, message))


def send_message_to_operator(session: ToolSession, message: str) -> str:
    """Send a message to the operator who hosts this system, and wait for the reply.

    Args:
        session: Injected run handle (hidden from the model).
        message: What you want to tell or ask the operator.
    """
    if not message.strip():
        raise ToolError("the message must not be empty")
    resume = ask_operator(session.run_id, session.cycle, message)
    reply, policy = reply_text(resume)
    session.details.update(message=message, reply=reply, policy=policy)
    return reply
