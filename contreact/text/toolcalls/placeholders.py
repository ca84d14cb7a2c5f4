"""Echoed placeholders: the call-format instructions sent back as if they were a call.

Small models often copy the format they were shown instead of filling it in
(``Action: the tool name`` / ``Action Input: the argument as JSON``,
``{"name": "<name>", "arguments": {...}}``, ``{"name": "tool_name", ...}``). Such a call
must never run (``write`` with key ``<key>`` would store garbage) and must not count as
an unknown tool either: the model gets a corrective turn that says what happened.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from contreact.text.toolcalls.outcomes import ParsedCall, ToolSchemas

# A name wrapped like a template slot: <name>, {tool_name}, [tool], <tool name>.
_SLOT = re.compile(r"[<{\[][^<>{}\[\]\n]{1,60}[>}\]]")
# Words that describe a tool instead of naming one ("the tool name", "tool_name",
# "the action to take", "name of the tool", "function name").
_NAME_PHRASE = re.compile(
    r"(?:the |a |your )?(?:name of (?:the |a )?)?(?:tool|function|action|name)"
    r"(?: ?(?:name|to (?:call|use|take)))?(?:,? should be one of.*)?",
)
# Input phrases: "the argument as JSON", "the input to the action", "arguments".
# A bare word ("input") may be a real key, so an article or a clause is required.
_INPUT_WORD = r"(?:input|inputs|argument|arguments|parameters|args)"
_INPUT_PHRASE = re.compile(
    rf"(?:the |a |your ){_INPUT_WORD}(?: (?:to|for|of|as|in) .{{0,60}})?"
    rf"|{_INPUT_WORD} (?:to|for|of|as|in) .{{0,60}}",
)
_ELLIPSIS = frozenset({"...", "…", "{...}", "[...]", "<...>"})


def _normal(text: str) -> str:
    text = text.strip().strip("`\"'*").strip()
    return re.sub(r"[\s_\-]+", " ", text).lower()


def is_placeholder_name(name: str, schemas: ToolSchemas) -> bool:
    """Whether ``name`` is a template slot or a description, not a tool's name."""
    if not isinstance(name, str) or name.strip() in schemas:
        return False
    raw = name.strip().strip("`\"'*").strip()
    if _SLOT.fullmatch(raw):
        return True
    return bool(_NAME_PHRASE.fullmatch(_normal(raw)))


def is_placeholder_value(value: Any) -> bool:
    """Whether an argument value is a template slot (``<key>``, ``...``, a description)."""
    if not isinstance(value, str):
        return False
    raw = value.strip()
    if raw in _ELLIPSIS or _SLOT.fullmatch(raw):
        return True
    return bool(_INPUT_PHRASE.fullmatch(_normal(raw)))


def is_echoed_call(call: ParsedCall, schemas: ToolSchemas) -> bool:
    """Whether the call is the format's placeholders rather than a real call."""
    if is_placeholder_name(call.name, schemas):
        return True
    values = list(call.args.values()) if isinstance(call.args, Mapping) else []
    return bool(values) and all(is_placeholder_value(v) for v in values)
