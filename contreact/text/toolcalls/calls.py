"""Turning a tool name and raw arguments, as some layer found them, into a checked call.

Every layer ends here, so an unknown tool, arguments that are not an object, or
arguments that do not fit the schema get the same corrective error whatever dialect the
model wrote. An :class:`Attempt` is what a layer reports: a call it read, or a call
attempt it could not read (and why).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from contreact.text.toolcalls.coercion import coerce_arguments, describe_params
from contreact.text.toolcalls.feedback import unknown_tool_error
from contreact.text.toolcalls.outcomes import ParsedCall, ToolSchemas
from contreact.text.toolcalls.text import (
    DECODER,
    compact_json,
    json_error,
    json_type_name,
    strip_fences,
    unquote,
)


@dataclass(frozen=True)
class Attempt:
    """A call found by a layer, or a call attempt that could not be parsed."""

    pos: int
    call: ParsedCall
    parsed: bool  # False: an attempt that yielded no call (its error says why)
    detail: str = ""


def broken(pos: int, name: str, detail: str) -> Attempt:
    """An attempt that yielded no call; ``detail`` says why (for the logs and the model)."""
    error = (
        f"This tool call could not be parsed ({detail}). It was not run; send it again "
        'as one JSON object: {"name": "<tool name>", "arguments": {...}}.'
    )
    return Attempt(pos, ParsedCall(name, {}, error), parsed=False, detail=detail)


def known(name: str, schemas: ToolSchemas) -> bool:
    """Whether ``name`` is one of the tools (also namespaced, ``functions.write``)."""
    name = name.strip()
    return name in schemas or ("." in name and name.rsplit(".", 1)[1] in schemas)


def build_call(name: Any, raw_args: Any, schemas: ToolSchemas) -> ParsedCall:
    """Validate one call (name + raw arguments) against the schemas."""
    tool = name.strip() if isinstance(name, str) else ("" if name is None else str(name))
    args, args_error = decode_args(raw_args)
    if tool not in schemas and "." in tool:
        # gpt-oss and OpenAI-style prompts namespace tools ("functions.write").
        short = tool.rsplit(".", 1)[1]
        if short in schemas:
            tool = short
    if tool not in schemas:
        return ParsedCall(tool, args, unknown_tool_error(tool, schemas))
    if args_error:
        return ParsedCall(tool, args, f"Invalid arguments for {tool}: {args_error}.")
    coerced, error = coerce_arguments(args, schemas[tool])
    if error:
        return ParsedCall(tool, args, f"Invalid arguments for {tool}: {error}")
    return ParsedCall(tool, coerced)


def decode_args(raw: Any) -> tuple[dict[str, Any], str | None]:
    """Arguments as a dict (JSON text decoded, double-encoded JSON too), or an error."""
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
            return {}, f"the arguments are not valid JSON ({json_error(exc)})"
        raw = decoded
    if isinstance(raw, Mapping):
        return {str(k): v for k, v in raw.items()}, None
    return {}, f"the arguments must be a JSON object, not {json_type_name(raw)}"


def call_from_input(pos: int, name: str, raw_input: str | None, schemas: ToolSchemas) -> Attempt:
    """A call whose input is free text: a JSON object, or one bare value.

    ReAct's ``Action Input:``, LangChain's ``action_input`` and ``<tool_input>`` carry
    either JSON arguments or a single plain value; a plain value goes to the tool's only
    (or only required) parameter, and a tool with several parameters asks for JSON.
    """
    if raw_input is None:
        return Attempt(pos, build_call(name, {}, schemas), parsed=True)
    text = strip_fences(raw_input).strip()
    if text.startswith("{"):
        try:
            value, _end = DECODER.raw_decode(text)
        except (ValueError, RecursionError) as exc:
            return broken(pos, name, f"Action Input is not valid JSON: {json_error(exc)}")
        return Attempt(pos, build_call(name, value, schemas), parsed=True)
    bare = unquote(text)
    tool = name if name in schemas else (name.rsplit(".", 1)[-1] if known(name, schemas) else "")
    if not tool:
        return Attempt(pos, build_call(name, {"input": bare} if bare else {}, schemas), True)
    schema = schemas[tool]
    props = schema.get("properties") if isinstance(schema, Mapping) else None
    props = props if isinstance(props, Mapping) else {}
    raw_required = schema.get("required") if isinstance(schema, Mapping) else None
    required = [r for r in raw_required or [] if isinstance(r, str)]
    if not props or not bare:
        # e.g. list; a tool with an open schema keeps the text as its "input".
        open_schema = isinstance(schema, Mapping) and schema.get("additionalProperties") is True
        args = {"input": bare} if bare and open_schema else {}
        return Attempt(pos, build_call(tool, args, schemas), parsed=True)
    if len(required) == 1:
        target = required[0]
    elif len(props) == 1:
        target = str(next(iter(props)))
    else:
        error = (
            f"Invalid arguments for {tool}: it takes several parameters, so give them as a "
            f"JSON object, e.g. Action Input: {compact_json({str(p): '...' for p in props})}. "
            f"Expected: {describe_params(props, required)}"
        )
        return Attempt(pos, ParsedCall(tool, {"input": bare}, error), parsed=True)
    return Attempt(pos, build_call(tool, {target: bare}, schemas), parsed=True)
