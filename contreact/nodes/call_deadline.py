"""A deadline for one whole model call: connecting, the first byte, every chunk, the total.

httpx's timeout bounds each network operation on its own: a stream that sends a chunk a
second never trips a 3-second read timeout, and ChatOllama streams by default, so a
model stuck in a loop behind a slow link could hold a run, and a worker slot, for as long
as it liked. Here the call gets one deadline. Each request's connect, write and read
timeouts are cut to the time left, and once the connection exists a timer shuts its
socket down when the deadline passes, which wakes the blocked read at once; the client
then closes the stream, so nothing of the abandoned call runs into the next attempt.
The caller sees `expired` and reports a timeout (transient: retried within the budget).

The deadline travels in a context variable, so one cached client (it owns the connection
pool) serves calls with and without one, and the hooks run in the calling thread.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import httpx

_current: ContextVar[Deadline | None] = ContextVar("contreact_call_deadline", default=None)

_CONNECTED = ("connection.connect_tcp.complete", "connection.start_tls.complete")
"""httpcore trace events that hand over a new connection's stream."""


class Deadline:
    """The end of one call, and the watchdog that enforces it on the call's connection."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds = seconds
        self._clock = clock
        self._ends = clock() + seconds
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self.expired = False
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True
        self._timer.start()

    def left(self) -> float:
        """Seconds left (never below a millisecond: httpx reads 0 as "no wait at all")."""
        return max(0.001, self._ends - self._clock())

    def watch(self, stream: Any) -> None:
        """Shut this connection down when the deadline passes (at once if it has)."""
        sock = stream.get_extra_info("socket") if stream is not None else None
        if not isinstance(sock, socket.socket):
            return
        with self._lock:
            self._sockets.append(sock)
            if not self.expired:
                return
        _shut(sock)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            sockets = list(self._sockets)
        for sock in sockets:
            _shut(sock)

    def cancel(self) -> None:
        """The call ended: stop the timer (its thread ends with it)."""
        self._timer.cancel()


def _shut(sock: socket.socket) -> None:
    # socket.socket's own shutdown, also for a TLS socket: SSLSocket.shutdown would drop
    # its SSL object under the reading thread. Shutting down (not closing) wakes a recv
    # blocked in another thread; the client closes the socket as it unwinds.
    try:
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
    except OSError:
        pass  # already closed by the client


@contextmanager
def call_deadline(seconds: float) -> Iterator[Deadline]:
    """Give the model call made inside this block `seconds` in all."""
    deadline = Deadline(seconds)
    token = _current.set(deadline)
    try:
        yield deadline
    finally:
        _current.reset(token)
        deadline.cancel()


def on_request(request: httpx.Request) -> None:
    """Request hook (httpx): cut the request's timeouts to the time left, watch a new connection."""
    deadline = _current.get()
    if deadline is None:
        return
    left = deadline.left()
    timeouts = dict(request.extensions.get("timeout") or {})
    request.extensions["timeout"] = {
        phase: left if value is None else min(value, left)
        for phase, value in {
            **dict.fromkeys(("connect", "read", "write", "pool")),
            **timeouts,
        }.items()
    }

    def trace(event: str, info: dict[str, Any]) -> None:
        if event in _CONNECTED:
            deadline.watch(info.get("return_value"))

    request.extensions["trace"] = trace


def on_response(response: httpx.Response) -> None:
    """Response hook (httpx): watch the connection the answer streams on (also a reused one)."""
    deadline = _current.get()
    if deadline is not None:
        deadline.watch(response.extensions.get("network_stream"))
