"""The six tools under their public names, their JSON schemas, and how a call is run.

Tools are plain typed functions whose first parameter is the injected `ToolSession`;
the schema the model sees is built from the remaining parameters and the docstring, so
hidden arguments (run id, database connection) can never appear in it or be set by it.
A run's `Toolset` is these built-ins less the disabled ones, plus tools of your own
(`tools.custom`).
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property, partial
from typing import Any, Literal

from contreact.checkpoints.activity import in_tool
from contreact.checkpoints.failpoints import tally
from contreact.checkpoints.lineage import SCOPE_SEPARATOR
from contreact.tools.containment import Escaped, Returned, contained
from contreact.tools.custom import CustomTool, ExtensionError
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
class Contained:
    """A call of a tool of your own that raised past `Exception` or never returned.

    `kind` is the ERROR event's (`tool_escaped`, `tool_timeout`); `said` finishes the
    sentence "tool `name` ..." for the run's record and its live output.
    """

    kind: Literal["tool_escaped", "tool_timeout"]
    said: str


@dataclass(frozen=True)
class ToolResult:
    """A tool's output as the model will see it, and whether it was an error."""

    output: str
    error: bool = False
    contained: Contained | None = None
    """Set when containment answered the call instead of the tool (`tools.containment`)."""


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


@dataclass(frozen=True)
class Toolset:
    """The tools one run offers: built-ins (less the disabled) and its own, in that order."""

    builtins: Mapping[str, ToolFunction] = field(default_factory=lambda: dict(TOOLS))
    custom: Mapping[str, CustomTool] = field(default_factory=dict)
    timeout_s: float | None = None
    """How long a call of a tool of your own may run before it is abandoned (None: no
    limit); a run's is its config's `tools.timeout_s`."""

    @classmethod
    def of(
        cls,
        disable: Iterable[str] = (),
        custom: Sequence[CustomTool] = (),
        timeout_s: float | None = None,
    ) -> Toolset:
        """The built-ins but `disable`, and `custom`; a name used twice is an error."""
        off = set(disable)
        builtins = {n: f for n, f in TOOLS.items() if n not in off}
        own: dict[str, CustomTool] = {}
        for tool in custom:
            if tool.name in builtins:
                raise ExtensionError(
                    f"tool {tool.origin.get('import_path')!r} is named {tool.name!r}, like a "
                    f"built-in tool; disable the built-in (`tools.disable`) or rename yours"
                )
            if tool.name in own:
                raise ExtensionError(
                    f"two tools are named {tool.name!r}: {own[tool.name].origin.get('import_path')}"
                    f" and {tool.origin.get('import_path')}"
                )
            own[tool.name] = tool
        return cls(builtins, own, timeout_s)

    @property
    def names(self) -> list[str]:
        """Every tool's name, in the order they are offered."""
        return [*self.builtins, *self.custom]

    @cached_property
    def schemas(self) -> list[dict[str, Any]]:
        """What `bind_tools` offers the model, and text mode describes."""
        if not self.custom and len(self.builtins) == len(TOOLS):
            return TOOL_SCHEMAS
        return [
            *(s for s in TOOL_SCHEMAS if s["function"]["name"] in self.builtins),
            *(t.schema for t in self.custom.values()),
        ]

    @cached_property
    def schemas_json(self) -> str:
        """The schemas as JSON: the key a client bound to them is cached under (dumped once)."""
        return json.dumps(self.schemas)

    @cached_property
    def parameter_schemas(self) -> dict[str, Mapping[str, Any]]:
        """Tool name -> JSON schema of its parameters (what the parser validates against)."""
        return {s["function"]["name"]: s["function"]["parameters"] for s in self.schemas}

    def run(self, name: str, args: Mapping[str, Any], session: ToolSession) -> ToolResult:
        """Run one tool call; a refusal becomes an error result, never an exception.

        `GraphInterrupt` from the operator tool is not caught: it must reach LangGraph.
        A tool of your own runs contained (`_contained`); one that raises an `Exception`
        but `ToolError` raises here (dispatch records it as the tool's failure).
        """
        own = self.custom.get(name)
        fn = self.builtins.get(name)
        if own is None and fn is None:
            return ToolResult(
                f"Error: unknown tool '{name}'. Valid tools: {', '.join(self.names)}.", True
            )
        tally(f"tool:{name}")
        try:
            if own is not None:
                return self._contained(own, args, session)
            assert fn is not None
            return ToolResult(fn(session, **args))
        except ToolError as exc:
            return ToolResult(f"Error: {exc}.", True)
        except TypeError as exc:
            if own is not None:
                raise
            # The parser validates arguments first; this guards direct callers.
            return ToolResult(f"Error: bad arguments for {name}: {exc}.", True)

    def _contained(
        self, tool: CustomTool, args: Mapping[str, Any], session: ToolSession
    ) -> ToolResult:
        """A tool of your own, run so that it can neither stop nor wedge the run.

        What it raises past `Exception` (`sys.exit`, ...) and a call past `timeout_s`
        become the call's error result; while it runs, the run's heartbeat says so.
        """
        run_id = session.run_id.partition(SCOPE_SEPARATOR)[0]
        with in_tool(run_id, tool.name):
            ended = contained(partial(tool, args, session.key), self.timeout_s, tool.name)
        if isinstance(ended, Returned):
            return ToolResult(ended.value)
        if isinstance(ended, Escaped):
            said = f"raised {ended.said}"
            return ToolResult(
                f"Error: the tool {tool.name} {said} instead of returning a result; it did "
                "not finish.",
                True,
                Contained("tool_escaped", said),
            )
        said = f"did not return within {ended.seconds:g} s (tools.timeout_s) and was abandoned"
        return ToolResult(
            f"Error: the tool {tool.name} {said}; its result is unknown, and it may still "
            "finish what it was doing.",
            True,
            Contained("tool_timeout", said),
        )


BUILTIN_TOOLSET = Toolset()
"""The six built-ins: a run with no `tools.add`, `tools.disable` or tool entry points."""


def run_tool(name: str, args: Mapping[str, Any], session: ToolSession) -> ToolResult:
    """Run one call of a built-in tool (see `Toolset.run`)."""
    return BUILTIN_TOOLSET.run(name, args, session)
