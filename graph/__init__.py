"""The ContReAct graph: `builder` to compile with a checkpointer, `graph` for LangGraph Studio.

`graph` is compiled without a checkpointer because `langgraph dev` refuses one that
brings its own; Studio gets the same checkpoints through the factory in langgraph.json.
"""

from graph.builder import builder, recursion_limit
from graph.state import AgentState, Context

graph = builder.compile(name="contreact")

__all__ = ["AgentState", "Context", "builder", "graph", "recursion_limit"]
