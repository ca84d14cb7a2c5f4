"""contreact: continuous ReAct agents on local Ollama models, built as a LangGraph state machine.

This package is the application face (CLI, runner, config, progress) and its services
(the bundled Ollama stub, analysis). Importing it must stay cheap: the stub server and
the CLI import their heavy dependencies themselves, and `contreact.run` (the engine) is
imported the first time it is used.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

__all__ = ["run", "tool"]


def __getattr__(name: str) -> Any:
    # Lazy: `import contreact` must not load LangGraph (the CLI's start-up, `--help`).
    if name == "run":
        from contreact.api import run

        return run
    if name == "tool":
        from contreact.tools.marks import tool

        return tool
    raise AttributeError(f"module 'contreact' has no attribute {name!r}")
