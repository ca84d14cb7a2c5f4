"""contreact: continuous ReAct agents on local Ollama models, built as a LangGraph state machine.

This package is the application face (CLI, runner, config, progress) and its services
(the bundled Ollama stub, analysis). Importing it must stay cheap: the stub server and
the CLI import their heavy dependencies themselves; `contreact.run` (the engine) and
`load` (runs as pandas DataFrames, `contreact.analysis.frames`) are imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from contreact.analysis.frames import Study, load

from contreact.version import __version__

__all__ = ["Study", "__version__", "load", "run", "tool"]

_STUDY = {"Study", "load"}


def __getattr__(name: str) -> Any:
    """Imported when first asked for: `import contreact` must not load LangGraph or pandas."""
    if name in _STUDY:
        from contreact.analysis import frames as study

        return getattr(study, name)
    if name == "run":
        from contreact.engine.api import run

        return run
    if name == "tool":
        from contreact.tools.marks import tool

        return tool
    raise AttributeError(f"module 'contreact' has no attribute {name!r}")
