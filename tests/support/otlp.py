"""A local OTLP receiver for tests: spans sent over HTTP/protobuf (or gRPC) to 127.0.0.1.

It decodes each request with opentelemetry-proto's `ExportTraceServiceRequest`, as a
collector would, and keeps the spans with their attributes, so a test can count them per
OpenInference span kind and compare them with a run's event log.
"""

from __future__ import annotations

import gzip
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

KIND = "openinference.span.kind"


@dataclass(frozen=True)
class ReceivedSpan:
    """One span as the collector got it."""

    name: str
    trace_id: str
    span_id: str
    parent_id: str
    attributes: dict[str, Any]
    resource: dict[str, Any]
    start_ns: int
    end_ns: int
    error: bool

    @property
    def kind(self) -> str:
        """Its OpenInference span kind (LLM, TOOL, CHAIN, AGENT...)."""
        return str(self.attributes.get(KIND, ""))


def _value(any_value: Any) -> Any:
    which = any_value.WhichOneof("value")
    return None if which is None else getattr(any_value, which)


def decode(body: bytes) -> list[ReceivedSpan]:
    """The spans of one `ExportTraceServiceRequest`."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    spans = []
    for resource_spans in request.resource_spans:
        resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                spans.append(
                    ReceivedSpan(
                        name=span.name,
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent_id=span.parent_span_id.hex(),
                        attributes={a.key: _value(a.value) for a in span.attributes},
                        resource=resource,
                        start_ns=span.start_time_unix_nano,
                        end_ns=span.end_time_unix_nano,
                        error=span.status.code == 2,
                    )
                )
    return spans


@dataclass
class Receiver:
    """What the receiver got; `url` is the base to give OTEL_EXPORTER_OTLP_ENDPOINT."""

    url: str
    spans: list[ReceivedSpan] = field(default_factory=list)
    requests: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, spans: list[ReceivedSpan]) -> None:
        with self.lock:
            self.spans.extend(spans)
            self.requests += 1

    def got(self) -> list[ReceivedSpan]:
        with self.lock:
            return list(self.spans)

    def kinds(self) -> Counter[str]:
        """Spans received per OpenInference kind."""
        return Counter(s.kind for s in self.got())

    def wait_for(self, done: Callable[[list[ReceivedSpan]], bool], timeout: float = 60) -> None:
        """Wait until `done(spans)` holds; fail with what arrived after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while not done(self.got()):
            if time.monotonic() > deadline:
                raise AssertionError(f"the spans never arrived; got {self.kinds()}")
            time.sleep(0.05)


@contextmanager
def otlp_http_receiver() -> Iterator[Receiver]:
    """An OTLP/HTTP receiver (`POST /v1/traces`, protobuf) on a free 127.0.0.1 port."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceResponse,
    )

    received: list[Receiver] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the name http.server calls
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            if self.path != "/v1/traces":
                self.send_error(404)
                return
            received[0].add(decode(body))
            answer = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    received.append(Receiver(f"http://127.0.0.1:{server.server_address[1]}"))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield received[0]
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def otlp_grpc_receiver() -> Iterator[Receiver]:
    """An OTLP/gRPC receiver (the trace service) on a free 127.0.0.1 port."""
    from concurrent import futures

    import grpc
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

    receiver: list[Receiver] = []

    class Service(trace_service_pb2_grpc.TraceServiceServicer):  # type: ignore[misc]
        def Export(self, request: Any, context: Any) -> Any:  # noqa: N802 - gRPC's name
            receiver[0].add(decode(request.SerializeToString()))
            return trace_service_pb2.ExportTraceServiceResponse()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Service(), server)  # type: ignore[no-untyped-call]
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    receiver.append(Receiver(f"http://127.0.0.1:{port}"))
    try:
        yield receiver[0]
    finally:
        server.stop(grace=None)


def closed_port() -> int:
    """A 127.0.0.1 port nothing listens on (bound, then closed): a collector that is down."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port
