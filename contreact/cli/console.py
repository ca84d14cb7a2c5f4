"""`contreact ui`: the lab console, a web page over the same storage as every command.

The web stack (Starlette, uvicorn, Jinja2) is the optional extra `ui` and is imported only
when the command runs: `contreact --help` and every other command start as fast as before.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from contreact.cli.app import BadInputError, command, out, storage

DEFAULT_PORT = 8040


@command(name="ui")
def ui(
    bind: Annotated[
        str,
        typer.Option(help="The address to listen on; other than loopback needs --token."),
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="The port (0: any free one).")] = DEFAULT_PORT,
    token: Annotated[
        str | None,
        typer.Option(
            envvar="CONTREACT_UI_TOKEN",
            help="A secret every request must carry (?token= once, or Authorization: Bearer).",
        ),
    ] = None,
) -> None:
    """Serve the lab console: watch, answer and compare runs in the browser."""
    try:
        from contreact.console.security import BindError
        from contreact.console.server import ListenError, serve
    except ImportError:
        raise BadInputError(
            "the console needs the `ui` extra: pip install 'contreact[ui]'"
        ) from None
    if not 0 <= port <= 65535:
        raise BadInputError(f"--port takes 0-65535, got {port}")
    where = storage()

    def announce(url: str) -> None:
        asked = "; open it with ?token=TOKEN once" if token else ""
        out.print(
            f"contreact console at {url} (runs in {where.shown}{asked}; Ctrl-C stops it)",
            markup=False,
            highlight=False,
        )
        sys.stdout.flush()

    try:
        serve(where, bind=bind, port=port, token=token or None, announce=announce)
    except (BindError, ListenError) as exc:
        raise BadInputError(str(exc)) from None
