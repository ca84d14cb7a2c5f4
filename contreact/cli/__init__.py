"""The `contreact` command line (console script `contreact`, also `python -m contreact`).

`app.py` holds the typer application and the shared error handling; each other module
registers one family of commands on it. Command modules import only typer, rich and
`app` at start-up; what a command needs is imported when it runs (start-up time is
measured by `benchmarks/cost/startup.py`).
"""

import signal

from contreact.cli import (  # noqa: F401 - each module registers its commands
    batch,
    chat,
    console,
    delete,
    doctor,
    graph,
    operator,
    research,
    runs,
    stub,
    vacuum,
)
from contreact.cli.app import app


def _stop_on_sigterm(signum: int, frame: object) -> None:
    # `kill`, systemd and batch runners stop a process with SIGTERM: end it the way
    # Ctrl-C does, so the run is left resumable and marked interrupted, not half-written.
    raise KeyboardInterrupt


def main() -> None:
    """Console-script entry point."""
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    app()
