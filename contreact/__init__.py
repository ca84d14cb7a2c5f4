"""contreact: continuous ReAct agents on local Ollama models, built as a LangGraph state machine.

The package's front door: `contreact.run` starts a run from a notebook or a script
(`engine.api`), `contreact.load` reads runs as pandas DataFrames (`analysis.frames`) and
`contreact.tool` marks a function as a tool, and `contreact.Veto` and `contreact.Rewrite` are
what a tool-call guard answers. Importing it must stay cheap: each is imported
on first use, so `import contreact` loads neither LangGraph nor pandas.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from contreact.analysis.frames import RunTables, load
    from contreact.extensions.hooks import Rewrite, Veto

from contreact.version import __version__

__all__ = ["Rewrite", "RunTables", "Veto", "__version__", "load", "run", "tool"]

_TABLES = {"RunTables", "load"}


def __getattr__(name: str) -> Any:
    """Imported when first asked for: `import contreact` must not load LangGraph or pandas."""
    if name in _TABLES:
        from contreact.analysis import frames

        return getattr(frames, name)
    if name == "run":
        from contreact.engine.api import run

        return run
    if name == "tool":
        from contreact.tools.marks import tool

        return tool
    if name in ("Veto", "Rewrite"):
        from contreact.extensions import hooks

        return getattr(hooks, name)
    raise AttributeError(f"module 'contreact' has no attribute {name!r}")
