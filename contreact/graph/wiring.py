"""The StateGraph: five nodes, typed routers, and the recursion limit derived from budgets.

```
START → assemble → invoke → parse ─┬─ calls ──→ dispatch → assemble
                                   ├─ retry ──→ assemble   (nudge / corrective turn)
                                   └─ final ──→ reflect ─┬─ next cycle → assemble
                                                          └─ done ──────→ END
```
The budgets stop a cycle; the recursion limit is set just above what the budgets allow,
so it only ever fires on a bug.
"""

from __future__ import annotations

from typing import Any, Literal

from langgraph.graph import END, START, StateGraph

from contreact.graph.state import AgentState, Context, RunInput
from contreact.nodes.assemble import assemble
from contreact.nodes.dispatch import dispatch
from contreact.nodes.invoke import invoke
from contreact.nodes.parse import parse
from contreact.nodes.reflect import reflect

NODES_PER_STEP = 4
"""assemble, invoke, parse, dispatch: supersteps per model call at most."""


def route_after_parse(state: AgentState) -> Literal["calls", "retry", "final"]:
    """Tool calls → dispatch; empty or malformed → assemble (corrective turn); final → reflect."""
    if state.outcome in ("calls", "retry", "final"):
        return state.outcome
    raise ValueError(f"parse left an unexpected outcome: {state.outcome!r}")


def route_after_reflect(state: AgentState) -> Literal["next cycle", "done"]:
    """Cycles left → assemble the next one; otherwise the run ends."""
    if state.status == "running":
        return "next cycle"
    if state.status == "completed":
        return "done"
    raise ValueError(f"reflect left an unexpected status: {state.status!r}")


def recursion_limit(ctx: Context, cycles: int) -> int:
    """Supersteps one invocation may take for `cycles` cycles under the run's budgets."""
    per_cycle = NODES_PER_STEP * ctx.limits.max_steps_per_cycle + 1
    return max(1, cycles) * per_cycle + 8


def wire(input_schema: type[Any]) -> StateGraph[Any, Context, Any, Any]:
    """The five nodes and their edges, reading input by `input_schema`."""
    wired = StateGraph(AgentState, context_schema=Context, input_schema=input_schema)
    wired.add_node("assemble", assemble)
    wired.add_node("invoke", invoke)
    wired.add_node("parse", parse)
    wired.add_node("dispatch", dispatch)
    wired.add_node("reflect", reflect)
    wired.add_edge(START, "assemble")
    wired.add_edge("assemble", "invoke")
    wired.add_edge("invoke", "parse")
    # The path maps name the edges, so Studio, mermaid and PNG drawings show why a route
    # is taken.
    wired.add_conditional_edges(
        "parse", route_after_parse, {"calls": "dispatch", "retry": "assemble", "final": "reflect"}
    )
    wired.add_edge("dispatch", "assemble")
    wired.add_conditional_edges(
        "reflect", route_after_reflect, {"next cycle": "assemble", "done": END}
    )
    return wired


builder = wire(AgentState)
"""For the runner: its input is a whole starting state (a new run, a fork, an extension)."""

graph = wire(RunInput).compile(name="contreact")
"""For Studio: the same graph, whose input form asks only for a run id, cycles and a task.
Compiled without a checkpointer: `langgraph dev` refuses a graph that brings its own;
Studio gets the same checkpoints through the factory named in langgraph.json."""
