"""What the parser returns: tool calls, a final answer, or no answer (and why).

Kept apart from the layers so that the ``parse`` node, dispatch and the tests can name
the outcomes without importing any parsing machinery.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

ToolSchemas: TypeAlias = Mapping[str, Mapping[str, Any]]
"""Tool name -> JSON schema of its parameters (``{"type": "object", "properties": ...}``)."""

Layer: TypeAlias = Literal["native", "json", "xml", "dialect", "react"]
"""Which layer found the calls: native ``tool_calls``, JSON objects, ``<tool_call>``
blocks, a model family's own markup (``nodes.toolcalls.layers.dialects``), ReAct text."""

NoAnswerReason: TypeAlias = Literal[
    "empty", "malformed_call", "echoed_placeholder_call", "unreadable_markup"
]
"""Why a message got a nudge or a corrective turn instead of running or closing the cycle:
nothing visible; a call that could not be parsed; the call-format instructions echoed
back as a call (``Action: the tool name``, ``{"name": "<name>"}``); tool-call markup of a
dialect the parser cannot read (so it must not become the reflection)."""

# Prefix of NoAnswer.detail when the last-resort guard in parse_response caught a bug;
# tests assert it never appears, so the guard cannot hide a defect.
INTERNAL_ERROR_PREFIX = "internal parser error: "


@dataclass(frozen=True)
class ParsedCall:
    """One tool call found in a model message.

    Attributes:
        name: The tool name as the model wrote it (``""`` when none could be read).
        args: The arguments, coerced to the tool's schema when they are valid; the
            model's raw arguments otherwise (so logs show what it sent).
        error: ``None`` when the call may run. Otherwise corrective text for the model
            (unknown tool, missing / extra / uncoercible arguments, unparsable call);
            such a call must not run and this text becomes its tool result.
    """

    name: str
    args: dict[str, Any]
    error: str | None = None


@dataclass(frozen=True)
class ToolCalls:
    """The message contains at least one tool call (valid or not).

    Attributes:
        calls: The calls in the order the model wrote them; never empty.
        layer: Which parser layer found them.
        text: The visible content with thinking removed and whitespace trimmed
            (may be ``""``).
    """

    calls: tuple[ParsedCall, ...]
    layer: Layer
    text: str


@dataclass(frozen=True)
class FinalAnswer:
    """The message is a final answer (the cycle's reflection).

    Attributes:
        text: Think-stripped, whitespace-trimmed, never empty. For ReAct text this is
            what follows ``Final Answer:``.
    """

    text: str


@dataclass(frozen=True)
class NoAnswer:
    """The message yields neither a usable call nor an answer.

    Attributes:
        kind: ``"empty"`` (nothing visible) or ``"malformed"`` (a call was attempted
            but could not be parsed, or carries markup the parser cannot read).
        detail: What was wrong, for the logs.
        feedback: The corrective or nudge text to send to the model as a user turn.
        reason: The finer reason (see :data:`NoAnswerReason`), recorded in the run's log.
    """

    kind: Literal["empty", "malformed"]
    detail: str
    feedback: str
    reason: NoAnswerReason = "malformed_call"


Parsed: TypeAlias = ToolCalls | FinalAnswer | NoAnswer
