"""Serving the console: uvicorn on a socket bound first, so its address is known and printed.

`contreact ui --port 0` takes any free port; the socket is bound before uvicorn starts, so
the address printed is the one that answers, and a port already taken is a clear error
before anything else starts.
"""

from __future__ import annotations

import socket
from collections.abc import Callable

import uvicorn

from contreact.checkpoints.storage import Storage
from contreact.console.app import build_app
from contreact.console.security import check_bind


class ListenError(Exception):
    """The console cannot listen where it was asked to (the port is taken, say)."""


def listen(bind: str, port: int) -> socket.socket:
    """A socket listening on `bind`:`port`; raises `ListenError`."""
    family = socket.AF_INET6 if ":" in bind else socket.AF_INET
    try:
        sock = socket.socket(family, socket.SOCK_STREAM)
    except OSError as exc:
        raise ListenError(f"cannot listen on {bind}: {exc.strerror or exc}") from None
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((bind.strip("[]"), port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise ListenError(
            f"cannot listen on {bind} port {port}: {exc.strerror or exc}; "
            "choose another with --port (0: any free one)"
        ) from None
    sock.set_inheritable(True)
    return sock


def address(sock: socket.socket) -> str:
    """The console's address on `sock`."""
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/"


def serve(
    storage: Storage,
    *,
    bind: str,
    port: int,
    token: str | None,
    announce: Callable[[str], None],
) -> None:
    """Serve the console over `storage` until interrupted; `announce` gets its address.

    Raises:
        BindError: `bind` reaches other machines and no token was given.
        ListenError: the address cannot be listened on.
    """
    check_bind(bind, token)
    app = build_app(storage, token=token, bind=bind)
    sock = listen(bind, port)
    announce(address(sock))
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=2,
    )
    uvicorn.Server(config).run(sockets=[sock])
