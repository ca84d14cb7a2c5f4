"""The settings of a run's extensions: its tools, and the interventions made without code.

A run's own tools, its built-in tools' selection and the interventions at given cycles are
part of its record; declared here, once, with their defaults and checks.
"""

from __future__ import annotations

import difflib
import re
from typing import Any

from pydantic import (
    Field,
    field_validator,
    model_validator,
)

from contreact.config.sections import Strict, ToolMode

IMPORT_PATH = r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$"
"""`package.module:name`, the form entry points use, for a tool or a hook."""


class ToolSettings(Strict):
    """Which tools the model gets and how they reach it.

    The old string form (`tools: text`) is accepted as `tools: {mode: text}`.
    """

    mode: ToolMode = "auto"
    """`native` (Ollama's `tools`), `text` (described after the system prompt, calls parsed
    from the answer), `constrained` (as `text`, and Ollama's `format` admits only one tool
    call or the final answer) or `auto` (the model's capabilities decide)."""
    add: list[str] = Field(default_factory=list)
    """Your own tools, as `package.module:function` (entry points in the `contreact.tools`
    group are added too)."""
    disable: list[str] = Field(default_factory=list)
    """Built-in tools the model does not get, by name (`delete`, `write`, ...)."""
    entry_points: bool = True
    """Add the tools installed packages declare in the `contreact.tools` entry-point group."""
    timeout_s: float | None = Field(300.0, gt=0)
    """How long one call of a tool of your own may run; past it the call is abandoned (its
    thread left behind) and the model told. None: no limit."""

    @model_validator(mode="before")
    @classmethod
    def _string_form(cls, value: Any) -> Any:
        return {"mode": value} if isinstance(value, str) else value

    @field_validator("add")
    @classmethod
    def _paths(cls, value: list[str]) -> list[str]:
        return import_paths(value)

    @field_validator("disable")
    @classmethod
    def _builtins(cls, value: list[str]) -> list[str]:
        unknown = [name for name in value if name not in BUILTIN_TOOLS]
        if unknown:
            hints = []
            for name in unknown:
                close = difflib.get_close_matches(name, BUILTIN_TOOLS, n=1, cutoff=0.5)
                hints.append(f"{name!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
            raise ValueError(
                f"no built-in tool {', '.join(hints)}; the built-ins are {', '.join(BUILTIN_TOOLS)}"
            )
        return value


BUILTIN_TOOLS = ("write", "read", "list", "delete", "pattern_search", "send_message_to_operator")
"""The built-in tools' names (`tools.registry.TOOLS` holds them; a test keeps the two equal)."""


def import_paths(value: list[str]) -> list[str]:
    """The import paths given, stripped; raises naming those not `package.module:name`."""
    bad = [p for p in value if not re.match(IMPORT_PATH, p.strip())]
    if bad:
        raise ValueError(f"{', '.join(repr(p) for p in bad)}: name it as `package.module:name`")
    return [p.strip() for p in value]


class MemoryChange(Strict):
    """A memory change an intervention makes."""

    clear: bool = False
    """Delete every memory of the run."""


class ToolFailure(Strict):
    """Calls of `tool` fail with `error` instead of running."""

    tool: str = Field(min_length=1)
    error: str = Field(min_length=1)


class Intervention(Strict):
    """One change to a run at a cycle, made without code; applied once, recorded as an event.

    When: `at_cycle` (one cycle) or `cycles` (a list). What: one of `operator_message` (a
    message from the operator, added to the cycle's opening turn), `memory` (`clear: true`
    deletes every memory as the cycle opens) or `tool_fails` (every call of that tool in
    those cycles returns the error instead of running).
    """

    at_cycle: int | None = Field(None, ge=1)
    cycles: list[int] | None = None
    operator_message: str | None = None
    memory: MemoryChange | None = None
    tool_fails: ToolFailure | None = None

    @model_validator(mode="after")
    def _one_of_each(self) -> Intervention:
        if (self.at_cycle is None) == (self.cycles is None):
            raise ValueError("give exactly one of `at_cycle` and `cycles`")
        if self.cycles is not None and (not self.cycles or min(self.cycles) < 1):
            raise ValueError("`cycles` lists cycle numbers of at least 1")
        kinds = [k for k in ("operator_message", "memory", "tool_fails") if getattr(self, k)]
        if len(kinds) != 1:
            raise ValueError(
                "give exactly one of `operator_message`, `memory` and `tool_fails`"
                + (f" (got {', '.join(kinds)})" if kinds else "")
            )
        if self.memory is not None and not self.memory.clear:
            raise ValueError("`memory` needs `clear: true` (the one memory change there is)")
        return self

    @property
    def kind(self) -> str:
        """`operator_message`, `memory` or `tool_fails`."""
        if self.operator_message is not None:
            return "operator_message"
        return "memory" if self.memory is not None else "tool_fails"

    def applies_to(self, cycle: int) -> bool:
        """Whether this intervention acts in `cycle`."""
        return cycle == self.at_cycle or cycle in (self.cycles or [])
