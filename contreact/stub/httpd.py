"""HTTP plumbing of the stub: the socket server and the per-connection handler.

Ollama serves HTTP/1.1 with keep-alive and chunked NDJSON streams; the real client
depends on both, so the handler speaks them (standard library only, ``http.server``,
so a server starts in milliseconds). What to answer is not decided here: every
request goes to the owning :class:`Router` (the :class:`~contreact.stub.server.StubServer`).
"""

from __future__ import annotations

import json
import logging
import socket
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol, cast

__all__ = ["Router", "StubHTTPServer", "StubHandler"]

log = logging.getLogger("contreact.stub.server")


class Router(Protocol):
    """What the handler needs from the server that owns it."""

    def route(self, h: StubHandler, method: str, raw: bytes) -> None:
        """Answer one request whose body has been read."""
        ...

    def track(self, conn: socket.socket, *, add: bool) -> None:
        """Note an open (``add``) or closed connection, so stop() can shut it down."""
        ...


class StubHTTPServer(ThreadingHTTPServer):
    """The socket server; one daemon thread per connection."""

    daemon_threads = True
    allow_reuse_address = True
    # Benchmarks open dozens of connections at once; the default backlog of 5 would
    # make some of them wait for a SYN retry.
    request_queue_size = 256

    def __init__(self, address: tuple[str, int], stub: Router) -> None:
        self.stub = stub
        super().__init__(address, StubHandler)


class StubHandler(BaseHTTPRequestHandler):
    """Routes one connection's requests to the owning server's :class:`Router`."""

    # HTTP/1.1 for keep-alive and chunked streaming, as Ollama serves.
    protocol_version = "HTTP/1.1"
    server_version = "ollama-stub"

    @property
    def stub(self) -> Router:
        """The server that decides the answers."""
        return cast(StubHTTPServer, self.server).stub

    def setup(self) -> None:
        """Prepare the connection and register it with the router."""
        super().setup()
        # Streams are many small writes; with Nagle's algorithm each one waits for the
        # client's delayed ACK (~40 ms), which would dwarf the latency benchmarks measure.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.stub.track(self.connection, add=True)

    def finish(self) -> None:
        """Close the connection and unregister it."""
        try:
            super().finish()
        finally:
            self.stub.track(self.connection, add=False)

    def log_message(self, format: str, *args: Any) -> None:
        """Log at debug level instead of printing to stderr."""
        log.debug("%s - %s", self.address_string(), format % args)

    # -- helpers -------------------------------------------------------------------

    def read_body(self) -> bytes:
        """Read the request body; always done first so closing never causes a reset."""
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def send_bytes(self, status: int, data: bytes, content_type: str) -> None:
        """Send a complete response with a Content-Length."""
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def send_json(self, status: int, obj: Any) -> None:
        """Send ``obj`` as a JSON response."""
        self.send_bytes(status, json.dumps(obj).encode(), "application/json; charset=utf-8")

    def send_half_json(self, data: bytes) -> None:
        """Announce all of a JSON body, send half of it and drop the connection.

        This is a server dying mid-answer: the client must see a truncated body, not an
        answer it could parse.
        """
        self.send_response(200)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data[: len(data) // 2])
        self.close_connection = True

    def start_stream(self) -> None:
        """Send headers for a chunked NDJSON stream."""
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def write_line(self, obj: Any) -> None:
        """Send one NDJSON line as one HTTP chunk."""
        data = json.dumps(obj).encode() + b"\n"
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def end_stream(self) -> None:
        """Send the terminating zero-length chunk."""
        self.wfile.write(b"0\r\n\r\n")

    # -- verbs ---------------------------------------------------------------------

    def _dispatch(self, method: str) -> None:
        # Read any body whatever the verb: unread bytes would corrupt the next request
        # on this keep-alive connection.
        body = self.read_body()
        try:
            self.stub.route(self, method, body)
        except OSError:
            # The client gave up (e.g. its timeout fired during a delay fault), or stop()
            # shut the socket down under a sleeping handler.
            self.close_connection = True

    def do_GET(self) -> None:
        """Serve one GET request."""
        self._dispatch("GET")

    def do_HEAD(self) -> None:
        """Serve one HEAD request."""
        self._dispatch("HEAD")

    def do_POST(self) -> None:
        """Serve one POST request."""
        self._dispatch("POST")

    def do_DELETE(self) -> None:
        """Serve one DELETE request."""
        self._dispatch("DELETE")
