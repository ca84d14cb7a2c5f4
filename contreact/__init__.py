"""contreact: continuous ReAct agents on local Ollama models, built as a LangGraph state machine.

This package is the application face (CLI, runner, config, progress) and its services
(the bundled Ollama stub, analysis). Importing it must stay cheap: the stub server and
the CLI import their heavy dependencies themselves, and `load` (runs as pandas DataFrames,
`contreact.analysis.study`) is imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from contreact.analysis.study import Study, load

__version__ = "0.1.0"

__all__ = ["Study", "__version__", "load"]

_LAZY = {"Study", "load"}


def __getattr__(name: str) -> Any:
    """`contreact.load` and `contreact.Study`, imported when first asked for."""
    if name in _LAZY:
        from contreact.analysis import study

        return getattr(study, name)
    raise AttributeError(f"module 'contreact' has no attribute {name!r}")
