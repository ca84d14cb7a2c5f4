"""The texts the model gets back when its message cannot be used as it is.

A corrective turn names every valid tool with its parameters and one example call, so
that a small model that got the format wrong can recover on its next step.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from contreact.text.toolcalls.outcomes import NoAnswer, ToolSchemas
from contreact.text.toolcalls.text import preview

__all__ = [
    "describe_tools",
    "echo_feedback",
    "empty_feedback",
    "malformed_feedback",
    "markup_feedback",
    "server_parse_error",
    "unknown_tool_error",
]


def malformed_feedback(detail: str, schemas: ToolSchemas) -> str:
    """Build the corrective user turn for a tool call that could not be parsed.

    Args:
        detail: What was wrong (shown to the model, shortened).
        schemas: The tools on offer, listed with their parameters.

    Returns:
        Text naming the valid tools and the expected call format.
    """
    example = example_call(schemas)
    return (
        "Your last message tried to call a tool, but the call could not be parsed "
        f"({preview(str(detail), 300)}). No tool was run.\n"
        f"Available tools: {describe_tools(schemas)}.\n"
        "To call a tool, use the tool-calling interface, or write one JSON object per "
        f"call, for example {example}. If you did not mean to call a tool, reply with "
        "plain text only."
    )


def echo_feedback(detail: str, schemas: ToolSchemas) -> str:
    """Build the corrective turn for call-format instructions echoed back as a call.

    Args:
        detail: What was echoed (shown to the model, shortened).
        schemas: The tools on offer, listed with their parameters.

    Returns:
        Text saying that placeholders are not a call, naming the valid tools.
    """
    return (
        "Your last message repeated the placeholders of the call format "
        f"({preview(str(detail), 200)}) instead of making a call. No tool was run.\n"
        f"Available tools: {describe_tools(schemas)}.\n"
        "To call a tool, write its real name and real arguments, for example "
        f"{example_call(schemas)}. If you did not mean to call a tool, reply with plain "
        "text only."
    )


def markup_feedback(detail: str, schemas: ToolSchemas) -> str:
    """Build the corrective turn for tool-call markup the parser cannot read.

    Args:
        detail: The markup found (shown to the model, shortened).
        schemas: The tools on offer, listed with their parameters.

    Returns:
        Text saying that no tool ran and the message was not taken as the final
        response, naming the valid tools and one readable call format.
    """
    return (
        "Your last message contains tool-call markup that could not be read "
        f"({preview(str(detail), 200)}). No tool was run, and the message was not taken "
        "as your final response.\n"
        f"Available tools: {describe_tools(schemas)}.\n"
        "To call a tool, use the tool-calling interface, or write one JSON object per "
        f"call, for example {example_call(schemas)}. If you did not mean to call a tool, "
        "reply with plain text only, without tool-call tokens."
    )


def empty_feedback() -> str:
    """Build the nudge sent after an empty (or thinking-only) message.

    Returns:
        Text asking the model to continue with a tool call or a plain-text answer.
    """
    return (
        "Your last message was empty. Please continue: call one of your tools, or, if "
        "you are done for now, reply with your final response as plain text."
    )


def server_parse_error(message: str, schemas: ToolSchemas) -> NoAnswer:
    """Turn Ollama's own tool-call parse failure into a malformed outcome.

    Ollama parses some models' tool calls server-side and answers with an error such as
    ``error parsing tool call: raw='{"name": ...', err=...`` when the model's output is
    broken. That is the model's mistake, not a transport failure, so it gets the same
    corrective turn as a malformed call found by :func:`parse_response`.

    Args:
        message: The server's error message.
        schemas: The tools on offer.

    Returns:
        A ``NoAnswer("malformed", ...)`` whose feedback names the valid tools.
    """
    text = message if isinstance(message, str) else str(message)
    detail = f"the server could not parse the tool call: {preview(text.strip(), 400)}"
    return NoAnswer("malformed", detail, malformed_feedback(detail, schemas), "malformed_call")


def describe_tools(schemas: ToolSchemas) -> str:
    """Every tool with its parameters: ``write(key, value), list(), ...``."""
    try:
        described = [tool_signature(str(name), schema) for name, schema in schemas.items()]
    except Exception:  # noqa: BLE001 - a broken schema mapping must not break feedback
        return "(no tools could be listed)"
    return ", ".join(described) if described else "(none)"


def tool_signature(name: str, schema: Any) -> str:
    props = schema.get("properties") if isinstance(schema, Mapping) else None
    raw_required = schema.get("required") if isinstance(schema, Mapping) else None
    required = set(raw_required) if isinstance(raw_required, list | tuple) else set()
    params = [
        str(p) if p in required else f"{p}?" for p in (props if isinstance(props, Mapping) else {})
    ]
    return f"{name}({', '.join(params)})"


def example_call(schemas: ToolSchemas) -> str:
    try:
        for name, schema in schemas.items():
            props = schema.get("properties") if isinstance(schema, Mapping) else None
            if isinstance(props, Mapping) and props:
                args = {str(p): "..." for p in props}
                return json.dumps({"name": str(name), "arguments": args}, ensure_ascii=False)
    except Exception:  # noqa: BLE001 - fall back to the generic example below
        pass
    return '{"name": "<tool name>", "arguments": {"<parameter>": "<value>"}}'


def unknown_tool_error(name: str, schemas: ToolSchemas) -> str:
    """The error of a call to a tool that does not exist, naming the ones that do."""
    shown = preview(name) if name else "(no name)"
    return (
        f'Unknown tool "{shown}". Available tools: {describe_tools(schemas)}. '
        "Call one of them by its exact name."
    )
