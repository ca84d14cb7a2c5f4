"""Message token estimates and a pair-preserving trim plan for the prompt of one model call.

Why this module exists: Ollama silently truncates a prompt that exceeds ``num_ctx``
from the front, which drops the system prompt (and with it the agent's identity, its
reflections and the tool instructions) without any error. The ``assemble`` node
therefore estimates the prompt size itself and, when it would not fit, drops the oldest
turns of the current cycle first. It must never drop the cycle's first user turn, never
the newest turn (the model needs the latest tool result to continue), and never separate
an assistant tool-call message from its tool results: Ollama (and every chat template)
expects each result to follow its call.

A message costs its text by the tokenizer-free estimate every part of contreact shares
(`contreact.text.tokens`), plus its tool calls and a per-message overhead.

Everything here is pure: no I/O, no logging; the caller logs what was trimmed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from contreact.text.tokens import estimate_tokens

__all__ = [
    "MESSAGE_OVERHEAD_TOKENS",
    "Trim",
    "fit_reflections",
    "message_tokens",
    "plan_trim",
]

MESSAGE_OVERHEAD_TOKENS = 4
"""Per-message cost of the chat template's role markers and separators."""


def message_tokens(message: BaseMessage) -> int:
    """Estimate the prompt tokens one chat message costs.

    Counts the content (a string or a list of content blocks), the tool calls of an
    assistant message (name and JSON arguments, as the chat template renders them) and
    a fixed per-message overhead.

    Args:
        message: Any LangChain message.

    Returns:
        The estimate, at least :data:`MESSAGE_OVERHEAD_TOKENS`.
    """
    total = MESSAGE_OVERHEAD_TOKENS + _content_tokens(message.content)
    for call in getattr(message, "tool_calls", None) or ():
        total += estimate_tokens(str(call.get("name") or ""))
        total += estimate_tokens(_json_text(call.get("args") or {}))
    return total


def _content_tokens(content: Any) -> int:
    if isinstance(content, str):
        return estimate_tokens(content)
    if isinstance(content, list):
        total = 0
        for block in content:
            if isinstance(block, str):
                total += estimate_tokens(block)
            elif isinstance(block, dict) and isinstance(block.get("text"), str):
                total += estimate_tokens(block["text"])
            elif block is not None:
                total += estimate_tokens(_json_text(block))
        return total
    return estimate_tokens(str(content)) if content is not None else 0


def _json_text(value: Any) -> str:
    try:
        # ensure_ascii=False: Ollama renders arguments as UTF-8, not \\u escapes.
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        return str(value)


@dataclass(frozen=True)
class Trim:
    """What to drop from the current cycle's messages so the prompt fits.

    Attributes:
        dropped: Indices into the planned ``messages``, ascending.
        tokens_before: ``fixed_tokens`` plus all messages.
        tokens_after: ``fixed_tokens`` plus the kept messages.
        fits: Whether ``tokens_after <= budget``.
    """

    dropped: tuple[int, ...]
    tokens_before: int
    tokens_after: int
    fits: bool


def plan_trim(messages: Sequence[BaseMessage], fixed_tokens: int, budget: int) -> Trim:
    """Plan which of the cycle's oldest turns to drop so the prompt fits ``budget``.

    ``messages`` are the current cycle's messages; ``messages[0]`` is the cycle's first
    user turn. Messages form groups: an assistant message with tool calls together with
    all the tool messages right after it is one indivisible group; any other message is
    a group of its own. Whole groups are dropped, oldest first, until the prompt fits.
    The first group (the cycle's opening turn) and the newest group are never dropped,
    so the plan may end with ``fits=False``. Nothing is dropped when it already fits.

    Args:
        messages: The current cycle's messages, oldest first.
        fixed_tokens: Tokens of everything else in the prompt (system message with
            reflections and advisory, tool definitions).
        budget: Tokens available for the prompt (``num_ctx`` minus the output reserve).

    Returns:
        The plan; the caller removes ``dropped`` and logs the numbers.
    """
    sizes = [message_tokens(message) for message in messages]
    before = fixed_tokens + sum(sizes)
    if before <= budget:
        return Trim((), before, before, True)

    groups = _groups(messages)
    total = before
    dropped: list[int] = []
    # groups[0] holds messages[0]; groups[-1] is the newest turn. Both stay.
    for group in groups[1:-1]:
        if total <= budget:
            break
        dropped.extend(group)
        total -= sum(sizes[i] for i in group)
    return Trim(tuple(dropped), before, total, total <= budget)


def _groups(messages: Sequence[BaseMessage]) -> list[list[int]]:
    """Split message indices into turns that must be kept or dropped together."""
    groups: list[list[int]] = []
    for index, message in enumerate(messages):
        follows_calls = (
            isinstance(message, ToolMessage) and groups and _opens_group(messages[groups[-1][0]])
        )
        if follows_calls:
            groups[-1].append(index)
        else:
            groups.append([index])
    return groups


def _opens_group(message: BaseMessage) -> bool:
    return isinstance(message, AIMessage) and bool(message.tool_calls)


def fit_reflections(reflection_tokens: Sequence[int], budget: int) -> int:
    """Count how many of the oldest reflections to leave out so the rest fit ``budget``.

    Reflections are the agent's memory across cycles, so the newest are kept and the
    oldest go first.

    Args:
        reflection_tokens: Token cost of each reflection, oldest first.
        budget: Tokens available for the reflections section.

    Returns:
        The smallest ``k`` with ``sum(reflection_tokens[k:]) <= budget``: 0 when all fit,
        ``len(reflection_tokens)`` when none fit.
    """
    remaining = sum(reflection_tokens)
    for left_out, tokens in enumerate(reflection_tokens):
        if remaining <= budget:
            return left_out
        remaining -= tokens
    return len(reflection_tokens)
