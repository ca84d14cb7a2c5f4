"""The entry point: one model message in, tool calls / final answer / corrective turn out.

Layers, first hit wins: (1) native ``tool_calls``; (2) JSON call objects in the text;
(3) ``<tool_call>`` blocks; (4) the families' own markup (the dialect layer, with gpt-oss
harmony unwrapped first); (5) ReAct ``Action:`` text. Thinking is stripped before the
text layers. A layer "hits" when it yields at least one readable call, valid or not.
What no layer reads becomes the final answer, unless it is an attempt that failed, the
call format's placeholders echoed back, or still carries tool-call markup: those get a
corrective turn and never become the cycle's reflection.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from contreact.text.toolcalls.calls import Attempt
from contreact.text.toolcalls.feedback import (
    echo_feedback,
    empty_feedback,
    malformed_feedback,
    markup_feedback,
)
from contreact.text.toolcalls.layers.dialects import dialect_spans
from contreact.text.toolcalls.layers.harmony import unwrap_harmony
from contreact.text.toolcalls.layers.json_objects import (
    final_action_input,
    program_blocks,
    scan_json,
)
from contreact.text.toolcalls.layers.native import native_calls as read_native_calls
from contreact.text.toolcalls.layers.react import final_answer_text, scan_react
from contreact.text.toolcalls.layers.tags import scan_tool_call_blocks, tool_call_blocks
from contreact.text.toolcalls.markup import find_markup
from contreact.text.toolcalls.outcomes import (
    INTERNAL_ERROR_PREFIX,
    FinalAnswer,
    Layer,
    NoAnswer,
    Parsed,
    ParsedCall,
    ToolCalls,
    ToolSchemas,
)
from contreact.text.toolcalls.placeholders import is_echoed_call
from contreact.text.toolcalls.text import content_text, mask, preview, strip_fences, unique
from contreact.text.toolcalls.thinking import strip_thinking

_FINAL_TAG = re.compile(r"<final_answer>(.*?)(?:</final_answer>|\Z)", re.S)
# Wrappers around an answer that are no part of it: Command R7B's response tokens and
# Functionary v3.2's ">>>all" recipient line.
_ANSWER_WRAPPERS = re.compile(r"<\|(?:START|END)_RESPONSE\|>|^>>>[ \t]*all[ \t]*\r?\n?", re.M)


def parse_response(
    content: str, native_calls: Sequence[Mapping[str, Any]], schemas: ToolSchemas
) -> Parsed:
    """Classify one model message as tool calls, a final answer, or no answer.

    Args:
        content: The message text (LangChain content blocks are accepted too).
        native_calls: The message's native tool calls, LangChain style (``name`` and
            ``args`` as a dict or JSON string) or Ollama/OpenAI style (``function``).
        schemas: Tool name -> JSON schema of its parameters.

    Returns:
        ``ToolCalls`` when any call was found; ``NoAnswer("malformed")`` when a call was
        attempted but none could be read, the format's placeholders were echoed, or
        unreadable tool-call markup remains (``reason`` says which); ``NoAnswer("empty")``
        when nothing is visible; ``FinalAnswer`` otherwise. Never raises.
    """
    try:
        return _parse(content, native_calls, schemas)
    except Exception as exc:  # noqa: BLE001 - a parser bug must not kill a long run
        detail = f"{INTERNAL_ERROR_PREFIX}{type(exc).__name__}: {preview(str(exc), 200)}"
        feedback = malformed_feedback("unreadable message", schemas)
        return NoAnswer("malformed", detail, feedback, "malformed_call")


def _parse(content: Any, native_calls: Any, schemas: ToolSchemas) -> Parsed:
    raw = content_text(content)
    visible, thinking = strip_thinking(raw)
    harmony = unwrap_harmony(visible, schemas)
    if harmony is not None:
        visible = harmony.visible
        thinking = "\n".join(part for part in (thinking, harmony.thinking) if part)
    trimmed = visible.strip()

    natives = read_native_calls(native_calls, schemas)
    if natives:
        return ToolCalls(tuple(natives), "native", trimmed)
    if harmony is not None and any(a.parsed for a in harmony.calls):
        return _outcome(harmony.calls, "dialect", trimmed, schemas)
    if harmony is not None and harmony.calls:
        detail = "; ".join(unique(a.detail for a in harmony.calls)[:3])
        return NoAnswer("malformed", detail, malformed_feedback(detail, schemas), "malformed_call")

    if not trimmed:
        if thinking:
            detail = f"only thinking ({len(thinking)} chars), no visible text"
        else:
            detail = "empty message" if not raw else "whitespace-only message"
        return NoAnswer("empty", detail, empty_feedback(), "empty")

    # Tags and tokens quoted in a program are code: only JSON and ReAct read inside it.
    programs = program_blocks(visible)
    unquoted = mask(visible, programs)
    blocks = tool_call_blocks(unquoted)
    block_spans = [(block.start, block.end) for block in blocks]
    dialects = dialect_spans(mask(unquoted, block_spans), schemas)
    outside = mask(visible, sorted(block_spans + [(start, end) for start, end, _ in dialects]))
    layers: tuple[tuple[Layer, Callable[[], list[Attempt]]], ...] = (
        ("json", lambda: scan_json(outside, schemas)),
        ("xml", lambda: scan_tool_call_blocks(visible, blocks, schemas)),
        ("dialect", lambda: [attempt for _s, _e, found in dialects for attempt in found]),
        ("react", lambda: scan_react(outside, schemas)),
    )
    failures: list[str] = []
    for layer, scan in layers:
        attempts = scan()
        if any(a.parsed for a in attempts):
            return _outcome(attempts, layer, trimmed, schemas)
        failures.extend(a.detail for a in attempts)
    if failures:
        detail = "; ".join(unique(failures)[:3])
        return NoAnswer("malformed", detail, malformed_feedback(detail, schemas), "malformed_call")
    markup = find_markup(unquoted)
    if markup is not None:
        detail = f"tool-call markup no parser layer could read: {preview(markup, 60)!r}"
        return NoAnswer("malformed", detail, markup_feedback(detail, schemas), "unreadable_markup")
    return FinalAnswer(_answer_text(visible))


def _outcome(attempts: list[Attempt], layer: Layer, text: str, schemas: ToolSchemas) -> Parsed:
    """The calls a layer found, unless they are only the format's placeholders echoed."""
    ordered = sorted(attempts, key=lambda a: a.pos)  # stable: keeps body order
    echoed = [a.parsed and is_echoed_call(a.call, schemas) for a in ordered]
    if any(echoed) and not any(a.parsed and not e for a, e in zip(ordered, echoed, strict=True)):
        shown = ", ".join(unique(_shown(a.call) for a, e in zip(ordered, echoed, strict=True) if e))
        detail = f"echoed placeholder call(s): {preview(shown, 160)}"
        return NoAnswer(
            "malformed", detail, echo_feedback(shown, schemas), "echoed_placeholder_call"
        )
    calls = tuple(
        _refused_echo(a.call, schemas) if e else a.call
        for a, e in zip(ordered, echoed, strict=True)
    )
    return ToolCalls(calls, layer, text)


def _refused_echo(call: ParsedCall, schemas: ToolSchemas) -> ParsedCall:
    # Next to real calls an echoed one is not run: its result is the corrective text.
    return ParsedCall(call.name, call.args, echo_feedback(_shown(call), schemas))


def _shown(call: ParsedCall) -> str:
    try:
        args = json.dumps(call.args, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        args = "{...}"
    return f"{preview(call.name, 40)} {preview(args, 80)}"


def _answer_text(visible: str) -> str:
    """The reflection: the answer inside the agent formats' wrappers, else the text."""
    tagged = _FINAL_TAG.search(visible)
    if tagged and html.unescape(tagged.group(1)).strip():
        return html.unescape(tagged.group(1)).strip()  # LangChain XML agent
    stripped = visible.strip()
    if stripped.startswith(("{", "```")):
        answer = final_action_input(strip_fences(stripped))  # LangChain JSON agent
        if answer:
            return answer
    unwrapped = _ANSWER_WRAPPERS.sub("", visible)
    return final_answer_text(unwrapped) or final_answer_text(visible)


def call_signature(call: ParsedCall) -> str:
    """Canonical ``name:{sorted-json-args}`` text identifying a call.

    Used by dispatch to notice the model repeating the same call with the same
    arguments. Key order and whitespace do not matter; values do.

    Args:
        call: A parsed call.

    Returns:
        For example ``'read:{"key":"notes"}'``.
    """
    try:
        args = json.dumps(
            call.args, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str
        )
    except (TypeError, ValueError, RecursionError):
        try:
            args = repr(sorted(call.args.items(), key=lambda item: str(item[0])))
        except Exception:  # noqa: BLE001 - unrepresentable args: fall back to identity
            args = f"<args {id(call.args)}>"
    return f"{call.name}:{args}"
