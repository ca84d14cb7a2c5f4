"""`contreact.tool`: how a tool of your own says what it is, without importing the engine.

A decorator that only sets an attribute, so a package of tools can import it at no cost
and a notebook can mark a function before anything heavy is loaded. `tools.custom` reads
the mark when it builds the tool.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, overload

Effect = Literal["pure", "effectful"]
"""`pure`: a function of its arguments; `effectful`: it acts on the world outside, so it
takes the call's idempotency key to deduplicate on (see docs/config.md)."""

MARK = "__contreact_tool__"

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class ToolMark:
    """What the decorator recorded on a function."""

    effect: Effect = "pure"
    name: str | None = None


@overload
def tool(fn: F, /) -> F: ...


@overload
def tool(*, effect: Effect = "pure", name: str | None = None) -> Callable[[F], F]: ...


def tool(
    fn: F | None = None, /, *, effect: Effect = "pure", name: str | None = None
) -> F | Callable[[F], F]:
    """Mark a function as a contreact tool: `@tool` or `@tool(effect="effectful", name=...)`."""
    if effect not in ("pure", "effectful"):
        raise ValueError(f"effect must be 'pure' or 'effectful', not {effect!r}")

    def mark(function: F) -> F:
        setattr(function, MARK, ToolMark(effect, name))
        return function

    return mark(fn) if fn is not None else mark


def mark_of(fn: Any) -> ToolMark:
    """The mark a function carries (an unmarked function is a pure tool under its name)."""
    found = getattr(fn, MARK, None)
    return found if isinstance(found, ToolMark) else ToolMark()
