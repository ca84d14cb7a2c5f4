"""A local OTLP/HTTP collector for the tracing benchmark, in a process of its own.

``python benchmarks/cost/otlp_sink.py`` listens on a free 127.0.0.1 port, prints
``SINK READY URL``, takes ``POST /v1/traces`` (protobuf), decodes each request as a
collector would and counts its spans; ``GET /count`` answers the count as JSON. Its own CPU
work runs outside the measured interpreter, as a real collector's would.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

SPANS = [0]
LOCK = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    """Counts the spans of every export; answers the count."""

    def do_POST(self) -> None:  # noqa: N802 - the name http.server calls
        """Take one export request."""
        request = ExportTraceServiceRequest()
        request.ParseFromString(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        n = sum(len(s.spans) for r in request.resource_spans for s in r.scope_spans)
        with LOCK:
            SPANS[0] += n
        self._answer(ExportTraceServiceResponse().SerializeToString(), "application/x-protobuf")

    def do_GET(self) -> None:  # noqa: N802 - the name http.server calls
        """The spans received so far."""
        with LOCK:
            count = SPANS[0]
        self._answer(json.dumps({"spans": count}).encode(), "application/json")

    def _answer(self, body: bytes, kind: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet."""


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(f"SINK READY http://127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
