"""The six tools under their public names, their JSON schemas, and how a call is run.

Tools are plain typed functions whose first parameter is the injected `ToolSession`;
the schema the model sees is built from the remaining parameters and the docstring, so
hidden arguments (run id, database connection) can never appear in it or be set by it.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from contreact.checkpoints.failpoints import tally
from contreact.tools.memory import (
    ToolError,
    ToolSession,
    delete_memory,
    list_memories,
    read_memory,
    search_memory_keys,
    write_memory,
)
from contreact.tools.operator import send_message_to_operator

ToolFunction = Callable[..., str]

TOOLS: dict[str, ToolFunction] = {
    "write": write_memory,
    "read": read_memory,
    "list": list_memories,
    "delete": delete_memory,
    "pattern_search": search_memory_keys,
    "send_message_to_operator": send_message_to_operator,
}
"""Public tool name -> implementation, in the order they are offered to the model."""

MEMORY_TOOLS = frozenset({"write", "read", "list", "delete", "pattern_search"})
OPERATOR_TOOL = "send_message_to_operator"

_JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean"}


@dataclass(frozen=True)
class ToolResult:
    """A tool's output as the model will see it, and whether it was an error."""

    output: str
    error: bool = False


def _docstring_parts(fn: ToolFunction) -> tuple[str, dict[str, str]]:
    doc = inspect.getdoc(fn) or ""
    summary = doc.split("\n\n", 1)[0].replace("\n", " ").strip()
    args: dict[str, str] = {}
    match = re.search(r"^Args:\n((?:[ \t]+.*\n?)+)", doc, re.MULTILINE)
    if match:
        for line in match.group(1).splitlines():
            item = re.match(r"\s+(\w+):\s*(.*)", line)
            if item:
                args[item.group(1)] = item.group(2).strip()
    return summary, args


def tool_schema(name: str, fn: ToolFunction) -> dict[str, Any]:
    """The Ollama/OpenAI function schema of a tool, without its injected session."""
    summary, arg_docs = _docstring_parts(fn)
    params = list(inspect.signature(fn, eval_str=True).parameters.values())[1:]
    properties = {
        p.name: {
            "type": _JSON_TYPES.get(p.annotation, "string"),
            "description": arg_docs.get(p.name, ""),
        }
        for p in params
    }
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": summary,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": [p.name for p in params if p.default is inspect.Parameter.empty],
            },
        },
    }


TOOL_SCHEMAS: list[dict[str, Any]] = [tool_schema(n, f) for n, f in TOOLS.items()]
"""What `bind_tools` offers the model."""

PARAMETER_SCHEMAS: dict[str, Mapping[str, Any]] = {
    s["function"]["name"]: s["function"]["parameters"] for s in TOOL_SCHEMAS
}
"""Tool name -> JSON schema of its parameters (what the parser validates against)."""


def run_tool(name: str, args: Mapping[str, Any], session: ToolSession) -> ToolResult:
    """Run one tool call; a refusal becomes an error result, never an exception.

    `GraphInterrupt` from the operator tool is not caught: it must reach LangGraph.
    """
    fn = TOOLS.get(name)
    if fn is None:
        return ToolResult(f"Error: unknown tool '{name}'. Valid tools: {', '.join(TOOLS)}.", True)
    tally(f"tool:{name}")
    try:
        return ToolResult(fn(session, **args))
    except ToolError as exc:
        return ToolResult(f"Error: {exc}.", True)
    except TypeError as exc:
        # The parser validates arguments first; this guards direct callers.
        return ToolResult(f"Error: bad arguments for {name}: {exc}.", True)
