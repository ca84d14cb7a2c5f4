"""The `contreact` command line (console script `contreact`, also `python -m contreact`).

`app.py` holds the typer application and the shared error handling; each other module
registers one family of commands on it.
"""

from contreact.cli import (  # noqa: F401 - each module registers its commands
    batch,
    chat,
    operator,
    research,
    runs,
    studio,
)
from contreact.cli.app import app


def main() -> None:
    """Console-script entry point."""
    app()
