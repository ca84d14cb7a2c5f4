"""The ContReAct graph: `builder` to compile with a checkpointer, `graph` for LangGraph Studio.

Both are defined in `graph.wiring` (langgraph.json points there: the dev server reads that
module's namespace directly; the module is not called `builder` so that it cannot shadow
the `builder` attribute of this package). Here they load on first use, so that importing
`graph.state` does not build the graph and the read-only CLI commands start fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from langgraph.graph.state import CompiledStateGraph, StateGraph

    from contreact.graph.state import AgentState, Context
    from contreact.graph.wiring import recursion_limit

    builder: StateGraph[Any, Any, Any, Any]
    graph: CompiledStateGraph[Any, Any, Any, Any]

__all__ = ["AgentState", "Context", "builder", "graph", "recursion_limit"]


def __getattr__(name: str) -> Any:
    if name in ("builder", "graph", "recursion_limit"):
        return getattr(importlib.import_module("contreact.graph.wiring"), name)
    if name in ("AgentState", "Context"):
        return getattr(importlib.import_module("contreact.graph.state"), name)
    raise AttributeError(f"module 'graph' has no attribute {name!r}")
