"""Layer 1: the message's native ``tool_calls`` (Ollama's own parse of the model output).

Entries come LangChain style (``name``/``args``) or Ollama/OpenAI style (a nested
``function``); every entry becomes one call, garbage entries become error calls, so the
model hears about each of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from contreact.text.toolcalls.calls import build_call
from contreact.text.toolcalls.feedback import unknown_tool_error
from contreact.text.toolcalls.outcomes import ParsedCall, ToolSchemas


def native_calls(native_calls: Any, schemas: ToolSchemas) -> list[ParsedCall]:
    """One checked call per native entry (none when there are no entries)."""
    if not native_calls or isinstance(native_calls, str | bytes | Mapping):
        return []
    try:
        entries = list(native_calls)
    except TypeError:
        return []
    return [_native_call(entry, schemas) for entry in entries]


def _native_call(entry: Any, schemas: ToolSchemas) -> ParsedCall:
    if not isinstance(entry, Mapping):
        return ParsedCall("", {}, unknown_tool_error("", schemas))
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
    return build_call(source.get("name"), raw_args, schemas)
