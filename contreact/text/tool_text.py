"""Tools offered and called in plain text: the markup of contreact's text-tool mode.

A model whose server cannot pass tools natively is told about them in its system prompt,
one `- name(arguments): description` line each after an example call, and calls one by
writing `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`; each result comes back
in a user turn inside `<tool_response>` tags. The graph's nodes write this markup (the
prompt, the results) and the bundled stub server both reads it (which tools a request
offers, which calls were made) and writes it (a scripted agent's calls). The stub may not
import the graph, so the markup is defined here, once, for both.

The graph reads a model's answers with its forgiving parser (`nodes.toolcalls`), which
takes many dialects; `written_calls` reads only calls written exactly as shown here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

TOOL_CALL_OPEN = "<tool_call>"
TOOL_CALL_CLOSE = "</tool_call>"

_WRITTEN_CALL = re.compile(re.escape(TOOL_CALL_OPEN) + "(.*?)" + re.escape(TOOL_CALL_CLOSE), re.S)
_TOOL_LINE = re.compile(r"^- (\w+)\(", re.MULTILINE)


def tool_call_text(name: str, arguments: Mapping[str, Any]) -> str:
    """One tool call as a model in text-tool mode writes it."""
    call = {"name": name, "arguments": dict(arguments)}
    return f"{TOOL_CALL_OPEN}{json.dumps(call)}{TOOL_CALL_CLOSE}"


def written_calls(text: str) -> list[dict[str, Any]]:
    """The calls written in `text` as `tool_call_text` writes them, in order.

    Returns:
        `[{"name", "arguments"}, ...]`; a block that is not a JSON call with a name is
        skipped, and arguments that are not an object count as none.
    """
    calls: list[dict[str, Any]] = []
    for match in _WRITTEN_CALL.finditer(text):
        try:
            call = json.loads(match.group(1))
        except ValueError:
            continue
        if isinstance(call, dict) and isinstance(call.get("name"), str):
            arguments = call.get("arguments")
            calls.append(
                {
                    "name": call["name"],
                    "arguments": arguments if isinstance(arguments, dict) else {},
                }
            )
    return calls


def tool_line(name: str, arguments: str, description: str) -> str:
    """The system prompt's line for one tool: `- name(arguments): description`."""
    return f"- {name}({arguments}): {description}"


def listed_tools(system: str) -> list[str]:
    """The names of the tools a text-tool system prompt lists ([] when it offers none)."""
    if TOOL_CALL_OPEN not in system:
        return []
    return _TOOL_LINE.findall(system)


def tool_response_text(name: str, content: object) -> str:
    """A tool's result as the user turn that hands it back to a model in text-tool mode."""
    return f'<tool_response name="{name}">\n{content}\n</tool_response>'
