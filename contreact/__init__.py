"""contreact: continuous ReAct agents on local Ollama models, built as a LangGraph state machine.

This package is the application face (CLI, runner, config, progress) and its services
(the bundled Ollama stub, analysis). Importing it must stay cheap: the stub server and
the CLI import their heavy dependencies themselves.
"""

__version__ = "0.1.0"
