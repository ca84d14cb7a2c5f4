"""Layered tool-call parser: one model message in, tool calls / final answer / nothing out.

Why this module exists: local models served by Ollama do not reliably use the native
tool-calling channel. Depending on the model, its template and the prompt, a tool call
arrives as a native ``tool_calls`` entry, as a JSON object in the text (bare, fenced,
or a list of them), inside ``<tool_call>`` tags, or as ReAct text (``Action: ...``).
Thinking models additionally wrap their reasoning in ``<think>`` blocks that must never
leak into a reflection. The ``parse`` node hands every model message to
:func:`parse_response` and routes on the outcome:

* :class:`ToolCalls` -- run them (calls carrying an ``error`` are answered with that
  error instead of being run);
* :class:`FinalAnswer` -- the cycle's reflection;
* :class:`NoAnswer` -- send ``feedback`` as a corrective user turn.

Everything here is pure and total: no I/O, no global state, and
:func:`parse_response` never raises and never hangs, whatever the model produced
(50 kB messages, unbalanced braces, deeply nested JSON, odd Unicode). JSON is found
with :meth:`json.JSONDecoder.raw_decode` at candidate ``{`` positions rather than with
greedy regular expressions, and every regular expression below is written so that it
cannot backtrack catastrophically.
"""

from __future__ import annotations

import bisect
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

__all__ = [
    "FinalAnswer",
    "NoAnswer",
    "ParsedCall",
    "Parsed",
    "ToolCalls",
    "ToolSchemas",
    "call_signature",
    "coerce_arguments",
    "empty_feedback",
    "malformed_feedback",
    "parse_response",
    "server_parse_error",
    "strip_thinking",
]

ToolSchemas: TypeAlias = Mapping[str, Mapping[str, Any]]
"""Tool name -> JSON schema of its parameters (``{"type": "object", "properties": ...}``)."""


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
    layer: Literal["native", "json", "xml", "react"]
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
            but could not be parsed).
        detail: What was wrong, for the logs.
        feedback: The corrective or nudge text to send to the model as a user turn.
    """

    kind: Literal["empty", "malformed"]
    detail: str
    feedback: str


Parsed: TypeAlias = ToolCalls | FinalAnswer | NoAnswer

Layer: TypeAlias = Literal["native", "json", "xml", "react"]

# Prefix of NoAnswer.detail when the last-resort guard in parse_response caught a bug;
# tests assert it never appears, so the guard cannot hide a defect.
INTERNAL_ERROR_PREFIX = "internal parser error: "

_DECODER = json.JSONDecoder(strict=False)  # strict=False: models put raw newlines in strings
_MAX_NESTED_SEARCH = 8  # how deep to look for call objects wrapped in other JSON
_PREVIEW = 80

# ---------------------------------------------------------------------------------------
# Thinking
# ---------------------------------------------------------------------------------------

_THINK_TAG = re.compile(r"<(/?)(?:think|thinking)\s*>", re.IGNORECASE)


def strip_thinking(text: str) -> tuple[str, str]:
    """Separate visible text from the model's thinking.

    Removes ``<think>…</think>`` and ``<thinking>…</thinking>`` blocks (any case, over
    several lines; the first closing tag ends a block). An opening tag that is never
    closed hides everything after it. A closing tag with no opening tag means the chat
    template opened the block in the prompt (qwen3, deepseek-r1 do this), so everything
    before it is thinking.

    Args:
        text: The raw message content.

    Returns:
        ``(visible, thinking)``: the visible text (not trimmed) and the thinking text
        (blocks trimmed and joined by newlines; ``""`` when there was none).
    """
    if not isinstance(text, str):
        text = _content_text(text)
    thinking: list[str] = []
    visible = text
    # Removing a block can splice two halves of a tag together ("<thi<think>x</think>nk>"),
    # so repeat until no tag is left; every pass removes at least one tag, so this ends.
    while _THINK_TAG.search(visible):
        visible, found = _strip_thinking_once(visible)
        thinking.extend(found)
    return visible, "\n".join(part.strip() for part in thinking if part.strip())


def _strip_thinking_once(text: str) -> tuple[str, list[str]]:
    # Blocks do not nest: like the models' own templates and Ollama's parser, the first
    # closing tag ends the block, and an opening tag inside a block is just thinking.
    visible: list[str] = []
    thinking: list[str] = []
    in_block = False
    block_start = 0
    pos = 0
    for match in _THINK_TAG.finditer(text):
        closing = bool(match.group(1))
        if in_block:
            if closing:
                thinking.append(text[block_start : match.start()])
                in_block = False
                pos = match.end()
            continue
        visible.append(text[pos : match.start()])
        if closing:  # stray closing tag: the block was opened by the prompt template
            thinking.append("".join(visible))
            visible = []
            pos = match.end()
        else:
            in_block = True
            block_start = match.end()
    if in_block:
        thinking.append(text[block_start:])
    else:
        visible.append(text[pos:])
    return "".join(visible), thinking


# ---------------------------------------------------------------------------------------
# Argument coercion
# ---------------------------------------------------------------------------------------

_INT_TEXT = re.compile(r"[+-]?\d+")
_NUMBER_TEXT = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_TYPE_LABELS = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean (true or false)",
    "object": "a JSON object",
    "array": "a JSON array",
    "null": "null",
}


def coerce_arguments(
    args: Mapping[str, Any], schema: Mapping[str, Any]
) -> tuple[dict[str, Any], str | None]:
    """Coerce a call's arguments to its JSON schema and report what does not fit.

    Small models often send every value as a string (``"true"``, ``"42"``) or a number
    where a string is expected. Conversions: ``"true"``/``"false"`` (any case) to bool
    for boolean parameters; numeric strings to int/float for integer/number parameters
    (and integral floats to int); for string parameters a number or bool becomes its
    JSON text and an object or array becomes compact JSON text; strings holding JSON
    become objects/arrays for object/array parameters. ``None`` counts as "not given".
    Extra arguments are errors unless the schema sets ``additionalProperties``.

    Args:
        args: The arguments as the model sent them.
        schema: The tool's parameter schema (``properties``, ``required``).

    Returns:
        ``(coerced, None)`` when everything fits, else ``(partially coerced, error)``
        where ``error`` lists every problem and the expected parameters.
    """
    if not isinstance(args, Mapping):
        return {}, f"the arguments must be a JSON object, not {_json_type_name(args)}"
    if not isinstance(schema, Mapping):
        schema = {}
    raw_props = schema.get("properties")
    props: Mapping[str, Any] = raw_props if isinstance(raw_props, Mapping) else {}
    raw_required = schema.get("required")
    required = (
        [r for r in raw_required if isinstance(r, str)]
        if isinstance(raw_required, list | tuple)
        else []
    )
    additional = schema.get("additionalProperties", False)
    extras_allowed = additional is True or isinstance(additional, Mapping)

    coerced: dict[str, Any] = {}
    extra: list[str] = []
    problems: list[str] = []
    invalid: set[str] = set()
    for raw_key, value in args.items():
        key = str(raw_key)
        if value is None:
            continue  # null carries no information: same as not sending the argument
        if key not in props:
            if extras_allowed:
                coerced[key] = value
            else:
                extra.append(key)
            continue
        ok, new_value, why = _coerce_value(value, props[key])
        if ok:
            coerced[key] = new_value
        else:
            invalid.add(key)
            problems.append(f'argument "{_preview(key)}" {why}')

    missing = [r for r in required if r not in coerced and r not in invalid]
    parts: list[str] = []
    if missing:
        parts.append("missing required argument(s): " + ", ".join(missing))
    if extra:
        parts.append("unexpected argument(s): " + ", ".join(_preview(k) for k in extra))
    parts.extend(problems)
    if not parts:
        return coerced, None
    return coerced, "; ".join(parts) + f". Expected: {_describe_params(props, required)}"


def _coerce_value(value: Any, spec: Any) -> tuple[bool, Any, str]:
    """Return ``(ok, coerced, reason_if_not_ok)`` for one value against its sub-schema."""
    if not isinstance(spec, Mapping):
        return True, value, ""
    types = _schema_types(spec)
    if not types:
        return _check_enum(value, spec)
    for kind in types:  # a value that already has an allowed type is left alone
        if _has_type(value, kind):
            return _check_enum(_normalise(value, kind), spec)
    for kind in types:
        ok, converted = _convert(value, kind)
        if ok:
            return _check_enum(converted, spec)
    expected = " or ".join(_TYPE_LABELS.get(t, t) for t in types)
    return False, value, f"must be {expected}, got {_preview_value(value)}"


def _schema_types(spec: Mapping[str, Any]) -> list[str]:
    raw = spec.get("type")
    if isinstance(raw, str):
        return [raw]
    if isinstance(raw, list | tuple):
        return [t for t in raw if isinstance(t, str)]
    # Optional[...] from pydantic comes out as anyOf: [{"type": X}, {"type": "null"}].
    types: list[str] = []
    for key in ("anyOf", "oneOf"):
        options = spec.get(key)
        if isinstance(options, list | tuple):
            for option in options:
                if isinstance(option, Mapping):
                    types.extend(_schema_types(option))
    return types


def _has_type(value: Any, kind: str) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return (
            isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        )
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "object":
        return isinstance(value, Mapping)
    if kind == "array":
        return isinstance(value, list | tuple)
    if kind == "null":
        return value is None
    return True  # unknown type names are not ours to police


def _normalise(value: Any, kind: str) -> Any:
    if kind == "object" and not isinstance(value, dict):
        return dict(value)
    if kind == "array" and isinstance(value, tuple):
        return list(value)
    return value


def _convert(value: Any, kind: str) -> tuple[bool, Any]:
    try:
        if kind == "string":
            if isinstance(value, bool | int | float):
                return True, json.dumps(value)
            if isinstance(value, Mapping | list | tuple):
                return True, _compact_json(value)
        elif kind == "integer":
            if isinstance(value, str):
                text = value.strip()
                if _INT_TEXT.fullmatch(text):
                    return True, int(text)
                if _NUMBER_TEXT.fullmatch(text):
                    number = float(text)
                    if math.isfinite(number) and number.is_integer():
                        return True, int(number)
            elif isinstance(value, float) and math.isfinite(value) and value.is_integer():
                return True, int(value)
        elif kind == "number":
            if isinstance(value, str):
                text = value.strip()
                if _INT_TEXT.fullmatch(text):
                    return True, int(text)
                if _NUMBER_TEXT.fullmatch(text):
                    number = float(text)
                    if math.isfinite(number):
                        return True, number
        elif kind == "boolean":
            if isinstance(value, str) and value.strip().lower() in ("true", "false"):
                return True, value.strip().lower() == "true"
        elif kind in ("object", "array") and isinstance(value, str):
            decoded = json.loads(value)
            if kind == "object" and isinstance(decoded, dict):
                return True, decoded
            if kind == "array" and isinstance(decoded, list):
                return True, decoded
    except (ValueError, TypeError, RecursionError, OverflowError):
        # int() refuses > 4300 digits, json.dumps refuses odd objects and deep nesting.
        pass
    return False, value


def _check_enum(value: Any, spec: Mapping[str, Any]) -> tuple[bool, Any, str]:
    options = spec.get("enum")
    if isinstance(options, list | tuple) and options:
        try:
            allowed = value in options
        except Exception:  # noqa: BLE001 - exotic __eq__ must not crash the parser
            allowed = False
        if not allowed:
            listed = ", ".join(_preview_value(o) for o in options[:10])
            return False, value, f"must be one of {listed}, got {_preview_value(value)}"
    return True, value, ""


# ---------------------------------------------------------------------------------------
# Feedback texts
# ---------------------------------------------------------------------------------------


def malformed_feedback(detail: str, schemas: ToolSchemas) -> str:
    """Build the corrective user turn for a tool call that could not be parsed.

    Args:
        detail: What was wrong (shown to the model, shortened).
        schemas: The tools on offer, listed with their parameters.

    Returns:
        Text naming the valid tools and the expected call format.
    """
    example = _example_call(schemas)
    return (
        "Your last message tried to call a tool, but the call could not be parsed "
        f"({_preview(str(detail), 300)}). No tool was run.\n"
        f"Available tools: {_describe_tools(schemas)}.\n"
        "To call a tool, use the tool-calling interface, or write one JSON object per "
        f"call, for example {example}. If you did not mean to call a tool, reply with "
        "plain text only."
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
    detail = f"the server could not parse the tool call: {_preview(text.strip(), 400)}"
    return NoAnswer("malformed", detail, malformed_feedback(detail, schemas))


def _describe_tools(schemas: ToolSchemas) -> str:
    try:
        described = [_tool_signature(str(name), schema) for name, schema in schemas.items()]
    except Exception:  # noqa: BLE001 - a broken schema mapping must not break feedback
        return "(no tools could be listed)"
    return ", ".join(described) if described else "(none)"


def _tool_signature(name: str, schema: Any) -> str:
    props = schema.get("properties") if isinstance(schema, Mapping) else None
    raw_required = schema.get("required") if isinstance(schema, Mapping) else None
    required = set(raw_required) if isinstance(raw_required, list | tuple) else set()
    params = [
        str(p) if p in required else f"{p}?" for p in (props if isinstance(props, Mapping) else {})
    ]
    return f"{name}({', '.join(params)})"


def _describe_params(props: Mapping[str, Any], required: Sequence[str]) -> str:
    if not props:
        return "no arguments"
    described = []
    for name, spec in props.items():
        types = _schema_types(spec) if isinstance(spec, Mapping) else []
        kind = "/".join(types) if types else "any"
        flag = "required" if name in required else "optional"
        described.append(f"{name} ({kind}, {flag})")
    return ", ".join(described)


def _example_call(schemas: ToolSchemas) -> str:
    try:
        for name, schema in schemas.items():
            props = schema.get("properties") if isinstance(schema, Mapping) else None
            if isinstance(props, Mapping) and props:
                args = {str(p): "..." for p in props}
                return json.dumps({"name": str(name), "arguments": args}, ensure_ascii=False)
    except Exception:  # noqa: BLE001 - fall back to the generic example below
        pass
    return '{"name": "<tool name>", "arguments": {"<parameter>": "<value>"}}'


def _unknown_tool_error(name: str, schemas: ToolSchemas) -> str:
    shown = _preview(name) if name else "(no name)"
    return (
        f'Unknown tool "{shown}". Available tools: {_describe_tools(schemas)}. '
        "Call one of them by its exact name."
    )


# ---------------------------------------------------------------------------------------
# Building calls
# ---------------------------------------------------------------------------------------


def _build_call(name: Any, raw_args: Any, schemas: ToolSchemas) -> ParsedCall:
    """Validate one call (name + raw arguments) against the schemas."""
    tool = name.strip() if isinstance(name, str) else ("" if name is None else str(name))
    args, args_error = _decode_args(raw_args)
    if tool not in schemas and "." in tool:
        # gpt-oss and OpenAI-style prompts namespace tools ("functions.write").
        short = tool.rsplit(".", 1)[1]
        if short in schemas:
            tool = short
    if tool not in schemas:
        return ParsedCall(tool, args, _unknown_tool_error(tool, schemas))
    if args_error:
        return ParsedCall(tool, args, f"Invalid arguments for {tool}: {args_error}.")
    coerced, error = coerce_arguments(args, schemas[tool])
    if error:
        return ParsedCall(tool, args, f"Invalid arguments for {tool}: {error}")
    return ParsedCall(tool, coerced)


def _decode_args(raw: Any) -> tuple[dict[str, Any], str | None]:
    if raw is None:
        return {}, None
    if isinstance(raw, str):
        text = raw.strip()
        if not text:
            return {}, None
        try:
            decoded = json.loads(text, strict=False)
            if isinstance(decoded, str) and decoded.strip().startswith("{"):
                decoded = json.loads(decoded, strict=False)  # double-encoded arguments
        except (ValueError, RecursionError) as exc:
            return {}, f"the arguments are not valid JSON ({_json_error(exc)})"
        raw = decoded
    if isinstance(raw, Mapping):
        return {str(k): v for k, v in raw.items()}, None
    return {}, f"the arguments must be a JSON object, not {_json_type_name(raw)}"


@dataclass(frozen=True)
class _Attempt:
    """A call found by a layer, or a call attempt that could not be parsed."""

    pos: int
    call: ParsedCall
    parsed: bool  # False: an attempt that yielded no call (its error says why)
    detail: str = ""


def _broken(pos: int, name: str, detail: str) -> _Attempt:
    error = (
        f"This tool call could not be parsed ({detail}). It was not run; send it again "
        'as one JSON object: {"name": "<tool name>", "arguments": {...}}.'
    )
    return _Attempt(pos, ParsedCall(name, {}, error), parsed=False, detail=detail)


# ---------------------------------------------------------------------------------------
# Layer 1: native tool calls
# ---------------------------------------------------------------------------------------


def _native_calls(native_calls: Any, schemas: ToolSchemas) -> list[ParsedCall]:
    if not native_calls or isinstance(native_calls, str | bytes | Mapping):
        return []
    try:
        entries = list(native_calls)
    except TypeError:
        return []
    return [_native_call(entry, schemas) for entry in entries]


def _native_call(entry: Any, schemas: ToolSchemas) -> ParsedCall:
    if not isinstance(entry, Mapping):
        return ParsedCall("", {}, _unknown_tool_error("", schemas))
    function = entry.get("function")
    # LangChain tool_call dicts carry name/args; raw Ollama/OpenAI ones nest a "function".
    source: Mapping[str, Any] = (
        function if isinstance(function, Mapping) and "name" not in entry else entry
    )
    raw_args: Any = None
    for key in ("args", "arguments", "parameters"):
        if key in source:
            raw_args = source[key]
            break
    return _build_call(source.get("name"), raw_args, schemas)


# ---------------------------------------------------------------------------------------
# Layer 2: JSON objects in the content
# ---------------------------------------------------------------------------------------

_NAME_ATTEMPT = re.compile(r"""\{\s*["']name["']\s*:""")
_NAME_VALUE = re.compile(r"""\{\s*["']name["']\s*:\s*["']([^"'\\\r\n]{1,80})["']""")
_ARGS_KEYS = ("arguments", "parameters", "args")
_CALL_ENVELOPE_KEYS = frozenset({"name", "id", "type"})


def _scan_json(text: str, schemas: ToolSchemas, *, in_tag: bool = False) -> list[_Attempt]:
    """Find call objects in ``text`` by decoding JSON at every candidate ``{``.

    Args:
        text: Visible text (tool_call blocks masked out) or one tool_call body.
        schemas: The tools on offer.
        in_tag: The text is a ``<tool_call>`` body: any object in it is a call attempt.

    Returns:
        The calls and the unparsable attempts, in text order.
    """
    found: list[_Attempt] = []
    code = [] if in_tag else _code_blocks(text)
    pos = 0
    while True:
        start = text.find("{", pos)
        if start < 0:
            return found
        try:
            value, end = _DECODER.raw_decode(text, start)
        except (ValueError, RecursionError) as exc:
            if _NAME_ATTEMPT.match(text, start) and not _inside(start, code):
                name_match = _NAME_VALUE.match(text, start)
                name = name_match.group(1).strip() if name_match else ""
                found.append(_broken(start, name, f"invalid JSON: {_json_error(exc)}"))
            # Not JSON here: an inner "{" may still start a valid object.
            pos = start + 1
            continue
        calls = _calls_in_value(value, schemas, start, depth=0, top=True, loose=in_tag)
        if not calls and in_tag:
            calls = [_broken(start, "", "the JSON object has no tool name")]
        found.extend(calls)
        pos = end


_FENCE_LINE = re.compile(r"^[ \t]*```([^\r\n`]*)", re.MULTILINE)
_JSON_FENCES = frozenset({"", "json", "jsonc", "json5", "jsonl", "tool_call", "tool_code"})


def _code_blocks(text: str) -> list[tuple[int, int]]:
    """Spans of fenced code blocks in a language other than JSON (ascending).

    ``{"name": x, ...}`` in a Python snippet of a reflection is code, not a broken call;
    only fragments outside such blocks count as failed call attempts.
    """
    spans: list[tuple[int, int]] = []
    opening: re.Match[str] | None = None
    for fence in _FENCE_LINE.finditer(text):
        if opening is None:
            opening = fence
            continue
        language = opening.group(1).strip().split(" ", 1)[0].lower()
        if language not in _JSON_FENCES:
            spans.append((opening.start(), fence.end()))
        opening = None
    if opening is not None:
        language = opening.group(1).strip().split(" ", 1)[0].lower()
        if language not in _JSON_FENCES:
            spans.append((opening.start(), len(text)))
    return spans


def _inside(pos: int, spans: Sequence[tuple[int, int]]) -> bool:
    index = bisect.bisect_right(spans, pos, key=lambda span: span[0]) - 1
    return index >= 0 and spans[index][0] <= pos < spans[index][1]


def _calls_in_value(
    value: Any, schemas: ToolSchemas, pos: int, *, depth: int, top: bool, loose: bool
) -> list[_Attempt]:
    """Collect call objects in a decoded JSON value, looking inside wrappers.

    ``depth`` grows with every container (lists too), so arbitrarily nested model
    output cannot exhaust the interpreter's recursion limit.
    """
    if depth > _MAX_NESTED_SEARCH:
        return []
    if isinstance(value, dict):
        direct = _call_from_dict(value, schemas, pos, top=top, loose=loose)
        if direct is not None:
            return [direct]
        found: list[_Attempt] = []
        for item in value.values():
            found.extend(
                _calls_in_value(item, schemas, pos, depth=depth + 1, top=False, loose=False)
            )
        return found
    if isinstance(value, list):
        found = []
        for item in value:
            # A top-level list of calls ([{...}, {...}]) is as direct as a single object.
            found.extend(_calls_in_value(item, schemas, pos, depth=depth + 1, top=top, loose=loose))
        return found
    return []


def _call_from_dict(
    obj: dict[str, Any], schemas: ToolSchemas, pos: int, *, top: bool, loose: bool
) -> _Attempt | None:
    """Read one dict as a call, or return None when it is not shaped like one.

    Accepted shapes: ``{"name", "arguments"|"parameters"|"args"}``; the OpenAI wrapper
    ``{"function": {...}}``; ``{"function": "<name>", "arguments": ...}``; and, at the
    top level or inside a tag, ``{"name": <known tool>, <flattened arguments>}``.
    """
    function = obj.get("function")
    if isinstance(function, dict) and "name" not in obj:
        return _call_from_dict(function, schemas, pos, top=True, loose=True)
    args_key = next((k for k in _ARGS_KEYS if k in obj), None)
    name: Any = obj.get("name")
    if "name" not in obj and isinstance(function, str) and args_key:
        name = function
    elif "name" not in obj:
        return None
    if args_key is not None:
        raw_args = obj[args_key]
        if "description" in obj and isinstance(raw_args, Mapping) and "properties" in raw_args:
            # The model echoed a tool *definition*; it meant to do something with it.
            return _broken(pos, str(name), "that is a tool definition, not a tool call")
        return _Attempt(pos, _build_call(name, raw_args, schemas), parsed=True)
    if isinstance(name, str) and (top or loose) and _known(name, schemas):
        flattened = {k: v for k, v in obj.items() if k not in _CALL_ENVELOPE_KEYS}
        return _Attempt(pos, _build_call(name, flattened, schemas), parsed=True)
    if loose:
        return _Attempt(pos, _build_call(name, None, schemas), parsed=True)
    return None  # e.g. {"name": "Alice", "age": 3}: plain data, not a call


def _known(name: str, schemas: ToolSchemas) -> bool:
    name = name.strip()
    return name in schemas or ("." in name and name.rsplit(".", 1)[1] in schemas)


# ---------------------------------------------------------------------------------------
# Layer 3: <tool_call> blocks
# ---------------------------------------------------------------------------------------

_TOOL_CALL_TAG = re.compile(r"<(/?)tool_call\s*>", re.IGNORECASE)
_FENCE_OPEN = re.compile(r"```[\w+-]*[ \t]*\r?\n?")
_FUNCTION_TAG = re.compile(r"<function=([^>\s]+)\s*>")
_PARAMETER_TAG = re.compile(r"<parameter=([^>\s]+)\s*>")


@dataclass(frozen=True)
class _Block:
    start: int  # the opening tag
    body_start: int
    body_end: int
    end: int  # after the closing tag (or where the body stops)


def _tool_call_blocks(text: str) -> list[_Block]:
    tags = list(_TOOL_CALL_TAG.finditer(text))
    blocks: list[_Block] = []
    for index, tag in enumerate(tags):
        if tag.group(1):
            continue  # a closing tag; stray ones are ignored
        after = tags[index + 1] if index + 1 < len(tags) else None
        if after is None:  # unclosed at the end of the message
            blocks.append(_Block(tag.start(), tag.end(), len(text), len(text)))
        elif after.group(1):
            blocks.append(_Block(tag.start(), tag.end(), after.start(), after.end()))
        else:  # the next block opens before this one closed
            blocks.append(_Block(tag.start(), tag.end(), after.start(), after.start()))
    return blocks


def _mask(text: str, blocks: Sequence[_Block]) -> str:
    """Blank out the tool_call blocks so other layers do not read them (offsets kept)."""
    if not blocks:
        return text
    pieces: list[str] = []
    pos = 0
    for block in blocks:
        pieces.append(text[pos : block.start])
        pieces.append(" " * (block.end - block.start))
        pos = block.end
    pieces.append(text[pos:])
    return "".join(pieces)


def _scan_tool_call_blocks(
    text: str, blocks: Sequence[_Block], schemas: ToolSchemas
) -> list[_Attempt]:
    found: list[_Attempt] = []
    for block in blocks:
        body = _strip_fences(text[block.body_start : block.body_end]).strip()
        if not body:
            found.append(_broken(block.start, "", "empty <tool_call> block"))
            continue
        attempts = _scan_json(body, schemas, in_tag=True) if "{" in body else []
        if not any(a.parsed for a in attempts):
            xml_calls = _function_tag_calls(body, schemas)
            if xml_calls:
                attempts = xml_calls
        if not attempts:
            attempts = [_broken(0, "", f"<tool_call> body is not a call: {_preview(body, 60)!r}")]
        # Report positions in the message, keeping the body's internal order.
        found.extend(_Attempt(block.start + a.pos, a.call, a.parsed, a.detail) for a in attempts)
    return found


def _function_tag_calls(body: str, schemas: ToolSchemas) -> list[_Attempt]:
    """Read qwen3-coder style ``<function=NAME><parameter=P>value</parameter></function>``."""
    functions = list(_FUNCTION_TAG.finditer(body))
    found: list[_Attempt] = []
    for index, function in enumerate(functions):
        stop = functions[index + 1].start() if index + 1 < len(functions) else len(body)
        closing = body.find("</function>", function.end(), stop)
        segment = body[function.end() : closing if closing >= 0 else stop]
        args: dict[str, Any] = {}
        params = list(_PARAMETER_TAG.finditer(segment))
        for p_index, param in enumerate(params):
            limit = params[p_index + 1].start() if p_index + 1 < len(params) else len(segment)
            close = segment.find("</parameter>", param.end(), limit)
            value = segment[param.end() : close if close >= 0 else limit]
            args[param.group(1)] = _trim_one_newline(value)
        found.append(
            _Attempt(function.start(), _build_call(function.group(1), args, schemas), True)
        )
    return found


def _trim_one_newline(value: str) -> str:
    if value.startswith("\r\n"):
        value = value[2:]
    elif value.startswith("\n"):
        value = value[1:]
    if value.endswith("\r\n"):
        value = value[:-2]
    elif value.endswith("\n"):
        value = value[:-1]
    return value


def _strip_fences(text: str) -> str:
    """Remove a Markdown code fence wrapped around ``text`` (if any)."""
    stripped = text.strip()
    if not stripped.startswith("```"):
        return text
    opening = _FENCE_OPEN.match(stripped)
    inner = stripped[opening.end() if opening else 3 :]
    if inner.rstrip().endswith("```"):
        inner = inner.rstrip()[:-3]
    return inner


# ---------------------------------------------------------------------------------------
# Layer 4: ReAct text
# ---------------------------------------------------------------------------------------

# All anchored at a line start (used with .match on one line). Optional groups start
# with a mandatory character so that no two adjacent quantifiers compete for the same
# characters (that is what makes a regex backtrack catastrophically).
_LEAD = r"[ \t]*(?:[*_#>]+[ \t]*)?"
_TAIL = r"(?:[ \t]*\d+)?(?:[*_]+)?[ \t]*:(?:[*_]+)?"
_ACTION_LINE = re.compile(_LEAD + r"action" + _TAIL + r"(?P<rest>.*)", re.I | re.S)
_INPUT_LINE = re.compile(_LEAD + r"action[ \t_]*input" + _TAIL + r"(?P<rest>.*)", re.I | re.S)
_FINAL_LINE = re.compile(_LEAD + r"final[ \t_]*answer" + _TAIL + r"(?P<rest>.*)", re.I | re.S)
_OTHER_MARKER = re.compile(
    _LEAD + r"(?:thought|observation)" + _TAIL + r"(?P<rest>.*)", re.I | re.S
)
_ACTION_NAME = re.compile(r"""[`"'\[*]*(?P<name>[^\W\d][\w.\-]*)[`"'\]*]*""")
_NOT_AN_ACTION = frozenset(
    {"", "none", "n/a", "na", "nothing", "null", "no action", "no tool", "finish", "done"}
)
_FINAL_ACTION = "final answer"

_LineKind: TypeAlias = Literal["action", "input", "final", "marker", "text"]
# "Action Input:" must be tried before "Action:" (the latter would not match it anyway,
# but the order documents the intent).
_MARKER_PATTERNS: tuple[tuple[_LineKind, re.Pattern[str]], ...] = (
    ("input", _INPUT_LINE),
    ("action", _ACTION_LINE),
    ("final", _FINAL_LINE),
    ("marker", _OTHER_MARKER),
)


@dataclass(frozen=True)
class _Line:
    pos: int
    kind: _LineKind
    rest: str  # the text after the marker's colon (or the whole line for "text")
    rest_pos: int  # where ``rest`` starts in the scanned text


def _classify_lines(text: str) -> list[_Line]:
    lines: list[_Line] = []
    pos = 0
    for raw in text.splitlines(keepends=True):
        line = raw.rstrip("\r\n")
        kind: _LineKind = "text"
        rest, offset = line, 0
        for candidate, pattern in _MARKER_PATTERNS:
            match = pattern.match(line)
            if match:
                kind, rest, offset = candidate, match.group("rest"), match.start("rest")
                break
        lines.append(_Line(pos, kind, rest, pos + offset))
        pos += len(raw)
    return lines


def _region(lines: Sequence[_Line], index: int) -> str:
    """The marker's own rest-of-line plus the plain lines that follow it."""
    parts = [lines[index].rest]
    for line in lines[index + 1 :]:
        if line.kind != "text":
            break
        parts.append(line.rest)
    return "\n".join(parts).strip()


def _scan_react(text: str, schemas: ToolSchemas) -> list[_Attempt]:
    lines = _classify_lines(text)
    final_at = next((i for i, line in enumerate(lines) if line.kind == "final"), len(lines))
    has_final = final_at < len(lines)
    found: list[_Attempt] = []
    for index in range(final_at):
        line = lines[index]
        if line.kind != "action":
            continue
        attempt = _react_action(lines, index, schemas)
        if attempt is None:
            continue
        # With an explicit "Final Answer:" the model has finished; stray "Action:" lines
        # in its notes only count when they clearly name one of the tools.
        if has_final and not (attempt.parsed and _known(attempt.call.name, schemas)):
            continue
        found.append(attempt)
    return found


def _react_action(lines: Sequence[_Line], index: int, schemas: ToolSchemas) -> _Attempt | None:
    line = lines[index]
    rest = line.rest.strip()
    if rest.strip("`\"'[]*_ ").lower() in _NOT_AN_ACTION | {_FINAL_ACTION}:
        return None
    match = _ACTION_NAME.match(rest)
    if not match:
        return _broken(line.pos, "", f"unreadable Action line: {_preview(rest)!r}")
    name = match.group("name")
    after = rest[match.end() :].lstrip()
    inline: str | None = None
    if after.startswith(":"):
        inline = after[1:].strip() or None
    elif after.startswith("("):
        close = after.rfind(")")
        inline = (after[1:close] if close > 0 else after[1:]).strip() or None
    elif after.startswith("{"):
        inline = after
    elif after:
        return _broken(
            line.pos,
            name,
            f"unreadable Action line: {_preview(rest)!r} (expected 'Action: tool_name' "
            "followed by 'Action Input: {...}', or 'Action: tool_name: input')",
        )
    if inline is None:
        for later in range(index + 1, len(lines)):
            if lines[later].kind == "action":
                break
            if lines[later].kind == "input":
                inline = _region(lines, later) or None
                break
    return _react_call(line.pos, name, inline, schemas)


def _react_call(pos: int, name: str, raw_input: str | None, schemas: ToolSchemas) -> _Attempt:
    if raw_input is None:
        return _Attempt(pos, _build_call(name, {}, schemas), parsed=True)
    text = _strip_fences(raw_input).strip()
    if text.startswith("{"):
        try:
            value, _end = _DECODER.raw_decode(text)
        except (ValueError, RecursionError) as exc:
            return _broken(pos, name, f"Action Input is not valid JSON: {_json_error(exc)}")
        return _Attempt(pos, _build_call(name, value, schemas), parsed=True)
    bare = _unquote(text)
    tool = name if name in schemas else (name.rsplit(".", 1)[-1] if _known(name, schemas) else "")
    if not tool:
        return _Attempt(pos, _build_call(name, {"input": bare} if bare else {}, schemas), True)
    schema = schemas[tool]
    props = schema.get("properties") if isinstance(schema, Mapping) else None
    props = props if isinstance(props, Mapping) else {}
    raw_required = schema.get("required") if isinstance(schema, Mapping) else None
    required = [r for r in raw_required or [] if isinstance(r, str)]
    if not props:
        return _Attempt(pos, _build_call(tool, {}, schemas), parsed=True)  # e.g. list
    if not bare:
        return _Attempt(pos, _build_call(tool, {}, schemas), parsed=True)
    if len(required) == 1:
        target = required[0]
    elif len(props) == 1:
        target = str(next(iter(props)))
    else:
        error = (
            f"Invalid arguments for {tool}: it takes several parameters, so give them as a "
            f"JSON object, e.g. Action Input: {_compact_json({str(p): '...' for p in props})}. "
            f"Expected: {_describe_params(props, required)}"
        )
        return _Attempt(pos, ParsedCall(tool, {"input": bare}, error), parsed=True)
    return _Attempt(pos, _build_call(tool, {target: bare}, schemas), parsed=True)


def _unquote(text: str) -> str:
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'`":
        if text[0] == '"':
            try:
                decoded = json.loads(text)
                if isinstance(decoded, str):
                    return decoded
            except ValueError:
                pass
        return text[1:-1]
    return text


def _final_answer_text(visible: str) -> str:
    """The final answer: what follows ``Final Answer:``, else the whole visible text."""
    lines = _classify_lines(visible)
    for line in lines:
        if line.kind == "final":
            answer = visible[line.rest_pos :].strip()
            if answer:
                return answer
            # "Final Answer:" with nothing after it: the note is what came before.
            return visible[: line.pos].strip() or visible.strip()
    for index, line in enumerate(lines):
        if line.kind == "action" and line.rest.strip("`\"'[]*_ ").lower() == _FINAL_ACTION:
            # Old LangChain style: "Action: Final Answer" + "Action Input: <answer>".
            for later in range(index + 1, len(lines)):
                if lines[later].kind == "input":
                    answer = _unquote(_region(lines, later)).strip()
                    if answer:
                        return answer
                    break
    return visible.strip()


# ---------------------------------------------------------------------------------------
# The entry point
# ---------------------------------------------------------------------------------------


def parse_response(
    content: str, native_calls: Sequence[Mapping[str, Any]], schemas: ToolSchemas
) -> Parsed:
    """Classify one model message as tool calls, a final answer, or no answer.

    Layers, first hit wins: (1) ``native_calls``; (2) JSON call objects in the content
    (bare, fenced, in lists, several per message); (3) ``<tool_call>`` blocks; (4) ReAct
    ``Action:`` text. Thinking is stripped before layers 2–4 and before a final answer
    is taken. A layer "hits" when it yields at least one readable call, valid or not;
    unreadable attempts next to readable calls become error calls in their place.

    Args:
        content: The message text (LangChain content blocks are accepted too).
        native_calls: The message's native tool calls, LangChain style (``name`` and
            ``args`` as a dict or JSON string) or Ollama/OpenAI style (``function``).
        schemas: Tool name -> JSON schema of its parameters.

    Returns:
        ``ToolCalls`` when any call was found; ``NoAnswer("malformed")`` when a call was
        attempted but none could be read; ``NoAnswer("empty")`` when nothing is visible;
        ``FinalAnswer`` otherwise. Never raises.
    """
    try:
        return _parse(content, native_calls, schemas)
    except Exception as exc:  # noqa: BLE001 - a parser bug must not kill a long run
        detail = f"{INTERNAL_ERROR_PREFIX}{type(exc).__name__}: {_preview(str(exc), 200)}"
        return NoAnswer("malformed", detail, malformed_feedback("unreadable message", schemas))


def _parse(content: Any, native_calls: Any, schemas: ToolSchemas) -> Parsed:
    raw = _content_text(content)
    visible, thinking = strip_thinking(raw)
    trimmed = visible.strip()

    natives = _native_calls(native_calls, schemas)
    if natives:
        return ToolCalls(tuple(natives), "native", trimmed)

    if not trimmed:
        if thinking:
            detail = f"only thinking ({len(thinking)} chars), no visible text"
        else:
            detail = "empty message" if not raw else "whitespace-only message"
        return NoAnswer("empty", detail, empty_feedback())

    blocks = _tool_call_blocks(visible)
    outside = _mask(visible, blocks)
    layers: tuple[tuple[Layer, Callable[[], list[_Attempt]]], ...] = (
        ("json", lambda: _scan_json(outside, schemas)),
        ("xml", lambda: _scan_tool_call_blocks(visible, blocks, schemas)),
        ("react", lambda: _scan_react(outside, schemas)),
    )
    failures: list[str] = []
    for layer, scan in layers:
        attempts = scan()
        if any(a.parsed for a in attempts):
            ordered = sorted(attempts, key=lambda a: a.pos)  # stable: keeps body order
            return ToolCalls(tuple(a.call for a in ordered), layer, trimmed)
        failures.extend(a.detail for a in attempts)
    if failures:
        detail = "; ".join(_unique(failures)[:3])
        return NoAnswer("malformed", detail, malformed_feedback(detail, schemas))
    return FinalAnswer(_final_answer_text(visible))


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


# ---------------------------------------------------------------------------------------
# Small helpers
# ---------------------------------------------------------------------------------------


def _content_text(content: Any) -> str:
    """Flatten message content (a string or LangChain content blocks) to text."""
    if isinstance(content, str):
        return content
    if content is None:
        return ""
    if isinstance(content, list | tuple):
        parts: list[str] = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, Mapping) and isinstance(block.get("text"), str):
                parts.append(block["text"])
        return "".join(parts)
    return str(content)


def _compact_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _json_error(exc: BaseException) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} at line {exc.lineno} column {exc.colno}"
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    return _preview(str(exc))


def _json_type_name(value: Any) -> str:
    if isinstance(value, list | tuple):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if value is None:
        return "null"
    return type(value).__name__


def _preview(text: str, limit: int = _PREVIEW) -> str:
    text = str(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _preview_value(value: Any) -> str:
    try:
        shown = json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        shown = type(value).__name__
    return _preview(shown, 60)


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(item for item in items if item))
