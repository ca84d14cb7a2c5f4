"""A deadline for one whole model call: connecting, the first byte, every chunk, the total.

httpx's timeout bounds each network operation on its own: a stream that sends a chunk a
second never trips a 3-second read timeout, and ChatOllama streams by default, so a
model stuck in a loop behind a slow link could hold a run, and a worker slot, for as long
as it liked. Here the call gets one deadline. Each request's connect, write and read
timeouts are cut to the time left, and once the connection exists a watchdog thread
shuts its socket down when the deadline passes, which wakes the blocked read at once; the client
then closes the stream, so nothing of the abandoned call runs into the next attempt.
The caller sees `expired` and reports a timeout (transient: retried within the budget).

The deadline travels in a context variable, so one cached client (it owns the connection
pool) serves calls with and without one, and the hooks run in the calling thread.
"""

from __future__ import annotations

import heapq
import itertools
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import httpx

_current: ContextVar[Deadline | None] = ContextVar("contreact_call_deadline", default=None)

_CONNECTED = ("connection.connect_tcp.complete", "connection.start_tls.complete")
"""httpcore trace events that hand over a new connection's stream."""


class Deadline:
    """The end of one call, and the connections to shut when it passes."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.ends = time.monotonic() + seconds
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self.expired = False
        self.finished = False
        _watchdog.add(self)

    def left(self) -> float:
        """Seconds left (never below a millisecond: httpx reads 0 as "no wait at all")."""
        return max(0.001, self.ends - time.monotonic())

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

    def expire(self) -> None:
        """The deadline passed: shut every connection of the call (unless it has ended)."""
        with self._lock:
            if self.finished:
                return
            self.expired = True
            sockets = list(self._sockets)
        for sock in sockets:
            _shut(sock)

    def finish(self) -> None:
        """The call ended: its connections, back in the pool, are no longer this call's."""
        with self._lock:
            self.finished = True
            self._sockets.clear()
        _watchdog.forget()


class _Watchdog:
    """One thread that expires every deadline of the process, soonest first.

    A thread per call (threading.Timer) cost a measurable part of every model call; here a
    call costs a heap push (docs/benchmarks.md). Ended calls stay in the heap until their
    time comes or until they are most of it, then they are swept out.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, Deadline]] = []
        self._ids = itertools.count()
        self._ended = 0
        self._thread: threading.Thread | None = None

    def add(self, deadline: Deadline) -> None:
        with self._cond:
            heapq.heappush(self._heap, (deadline.ends, next(self._ids), deadline))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="contreact-call-deadlines", daemon=True
                )
                self._thread.start()
            self._cond.notify()

    def forget(self) -> None:
        with self._cond:
            self._ended += 1
            if self._ended > 64 and self._ended * 2 > len(self._heap):
                self._heap = [entry for entry in self._heap if not entry[2].finished]
                heapq.heapify(self._heap)
                self._ended = 0

    def pending(self) -> int:
        """Deadlines of calls still running (for tests)."""
        with self._cond:
            return sum(not entry[2].finished for entry in self._heap)

    def _run(self) -> None:
        while True:
            with self._cond:
                now = time.monotonic()
                due = []
                while self._heap and self._heap[0][0] <= now:
                    due.append(heapq.heappop(self._heap)[2])
                if not due:
                    self._cond.wait(self._heap[0][0] - now if self._heap else None)
                    continue
            for deadline in due:
                deadline.expire()


_watchdog = _Watchdog()


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
        deadline.finish()


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
