"""Layer 3: calls inside ``<tool_call>`` blocks (Hermes, Qwen, GLM, Seed-OSS, text mode).

A block's body is a JSON call (Hermes, Qwen 2.5/3, contreact's own text-tool mode), or
XML: Qwen3-Coder's ``<function=NAME><parameter=P>value</parameter></function>``, or
GLM-4.5's ``NAME`` followed by ``<arg_key>``/``<arg_value>`` pairs. Anything else inside
the tags is a call attempt that could not be read. Blocks are found by pairing tags in
one pass; an unclosed block runs to the end of the message.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from contreact.text.toolcalls.calls import Attempt, broken, build_call
from contreact.text.toolcalls.layers.json_objects import scan_json
from contreact.text.toolcalls.outcomes import ToolSchemas
from contreact.text.toolcalls.text import (
    DECODER,
    json_error,
    preview,
    strip_fences,
    trim_one_newline,
)

_TOOL_CALL_TAG = re.compile(r"<(/?)(?:seed:)?tool_call\s*>", re.IGNORECASE)
_FUNCTION_TAG = re.compile(r"<function=([^>\s]+)\s*>")
_PARAMETER_TAG = re.compile(r"<parameter=([^>\s]+)\s*>")
_GLM_NAME = re.compile(r"\s*([^\W\d][\w.\-]*)\s*(?=<arg_key>|$)")
_ARG_KEY = re.compile(r"<arg_key>([^<]*)</arg_key>\s*<arg_value>")


@dataclass(frozen=True)
class Block:
    """One ``<tool_call>`` block's place in the message."""

    start: int  # the opening tag
    body_start: int
    body_end: int
    end: int  # after the closing tag (or where the body stops)


def tool_call_blocks(text: str) -> list[Block]:
    """The ``<tool_call>`` blocks of ``text``, in order."""
    tags = list(_TOOL_CALL_TAG.finditer(text))
    blocks: list[Block] = []
    for index, tag in enumerate(tags):
        if tag.group(1):
            continue  # a closing tag; stray ones are ignored
        after = tags[index + 1] if index + 1 < len(tags) else None
        if after is None:  # unclosed at the end of the message
            blocks.append(Block(tag.start(), tag.end(), len(text), len(text)))
        elif after.group(1):
            blocks.append(Block(tag.start(), tag.end(), after.start(), after.end()))
        else:  # the next block opens before this one closed
            blocks.append(Block(tag.start(), tag.end(), after.start(), after.start()))
    return blocks


def scan_tool_call_blocks(
    text: str, blocks: Sequence[Block], schemas: ToolSchemas
) -> list[Attempt]:
    """The calls (and unreadable attempts) in the blocks, in message order."""
    found: list[Attempt] = []
    for block in blocks:
        body = strip_fences(text[block.body_start : block.body_end]).strip()
        if not body:
            found.append(broken(block.start, "", "empty <tool_call> block"))
            continue
        attempts = scan_json(body, schemas, in_tag=True) if "{" in body else []
        if not any(a.parsed for a in attempts):
            xml_calls = function_tag_calls(body, schemas) or _glm_calls(body, schemas)
            if xml_calls:
                attempts = xml_calls
        if not attempts:
            attempts = [broken(0, "", f"<tool_call> body is not a call: {preview(body, 60)!r}")]
        # Report positions in the message, keeping the body's internal order.
        found.extend(Attempt(block.start + a.pos, a.call, a.parsed, a.detail) for a in attempts)
    return found


def function_tag_calls(body: str, schemas: ToolSchemas) -> list[Attempt]:
    """Read ``<function=NAME>`` calls up to ``</function>``.

    The body is ``<parameter=P>`` tags (Qwen3-Coder, Seed-OSS) or a JSON object
    (Functionary v3.1).
    """
    functions = list(_FUNCTION_TAG.finditer(body))
    found: list[Attempt] = []
    for index, function in enumerate(functions):
        stop = functions[index + 1].start() if index + 1 < len(functions) else len(body)
        closing = body.find("</function>", function.end(), stop)
        segment = body[function.end() : closing if closing >= 0 else stop]
        params = list(_PARAMETER_TAG.finditer(segment))
        if not params and segment.strip().startswith("{"):
            found.append(_json_args_call(function.start(), function.group(1), segment, schemas))
            continue
        args: dict[str, Any] = {}
        for p_index, param in enumerate(params):
            limit = params[p_index + 1].start() if p_index + 1 < len(params) else len(segment)
            close = segment.find("</parameter>", param.end(), limit)
            value = segment[param.end() : close if close >= 0 else limit]
            args[param.group(1)] = trim_one_newline(value)
        found.append(Attempt(function.start(), build_call(function.group(1), args, schemas), True))
    return found


def _json_args_call(pos: int, name: str, text: str, schemas: ToolSchemas) -> Attempt:
    start = text.find("{")
    try:
        value, _end = DECODER.raw_decode(text, start)
    except (ValueError, RecursionError) as exc:
        return broken(
            pos, name, f"the arguments of {preview(name, 40)} are not JSON: {json_error(exc)}"
        )
    return Attempt(pos, build_call(name, value, schemas), parsed=True)


def _glm_calls(body: str, schemas: ToolSchemas) -> list[Attempt]:
    """Read GLM-4.5's ``NAME<arg_key>k</arg_key><arg_value>v</arg_value>...``."""
    name = _GLM_NAME.match(body)
    if not name:
        return []
    args: dict[str, Any] = {}
    keys = list(_ARG_KEY.finditer(body, name.end()))
    for index, key in enumerate(keys):
        stop = keys[index + 1].start() if index + 1 < len(keys) else len(body)
        close = body.find("</arg_value>", key.end(), stop)
        value = body[key.end() : close if close >= 0 else stop]
        args[key.group(1).strip()] = _glm_value(value.strip())
    return [Attempt(0, build_call(name.group(1), args, schemas), parsed=True)]


def _glm_value(text: str) -> Any:
    # GLM writes strings raw and other types as JSON; coercion handles "42" for integers.
    if text[:1] in "{[":
        try:
            return DECODER.decode(text)
        except (ValueError, RecursionError):
            return text
    return text
