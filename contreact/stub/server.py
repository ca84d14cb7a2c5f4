"""An Ollama-compatible HTTP server for the demo, the tests and the benchmarks.

No Ollama binary or model weights exist where this project is built and tested, yet the
engine must be exercised through the real ``langchain_ollama.ChatOllama`` client over
real HTTP: its streaming parser, its tool-call handling and its exceptions are part of
what is being tested. So this module speaks enough of Ollama's API (``/api/chat``
streamed and not, ``/api/tags``, ``/api/show``, ``/api/version``, ``/api/embed``) for
that client, answers with an :class:`~contreact.stub.agents.Agent`, and fails on demand
through the fault queue (:mod:`contreact.stub.faults`).

Control endpoints under ``/_stub/`` let tests and subprocess users inspect recorded
requests, queue faults and change the model list while the server runs.

Standard library only (``http.server``), so starting one costs milliseconds.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import socket
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import IO, Any, cast
from urllib.parse import parse_qs, urlsplit

from contreact.stub.agents import (
    DEFAULT_EMBEDDING_MODELS,
    DEFAULT_MODELS,
    Agent,
    ChatRequest,
    Reply,
    SimulatedAgent,
    canonical_model_name,
    embed_text,
    estimate_tokens,
    load_scenario,
)
from contreact.stub.faults import Fault, FaultQueue

__all__ = ["OLLAMA_VERSION", "StubServer"]

log = logging.getLogger(__name__)

OLLAMA_VERSION = "0.12.6"
CHAT_CAPABILITIES: tuple[str, ...] = ("completion", "tools")
EMBEDDING_CAPABILITIES: tuple[str, ...] = ("embedding",)

# Synthetic per-token timings (ns): plausible numbers so tokens/s displays have
# something to show; wall time still bounds total_duration from below.
_LOAD_NS = 1_000_000
_PROMPT_NS_PER_TOKEN = 100_000
_EVAL_NS_PER_TOKEN = 1_000_000


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def _split(text: str, parts: int) -> list[str]:
    """Split ``text`` at spaces into at most ``parts`` pieces that concatenate back to it.

    Real Ollama streams a token at a time; a few pieces are enough to prove the client
    reassembles a stream without flooding tests with chunks.
    """
    if not text:
        return []
    cuts = [0]
    for i in range(1, parts):
        pos = text.find(" ", len(text) * i // parts)
        if pos > cuts[-1]:
            cuts.append(pos)
    cuts.append(len(text))
    return [text[a:b] for a, b in zip(cuts, cuts[1:], strict=False) if b > a]


@dataclass(frozen=True)
class _Model:
    name: str
    capabilities: tuple[str, ...]

    @property
    def is_embedding(self) -> bool:
        return "embedding" in self.capabilities


class _HTTPServer(ThreadingHTTPServer):
    """The socket server; one daemon thread per connection."""

    daemon_threads = True
    allow_reuse_address = True
    # Benchmarks open dozens of connections at once; the default backlog of 5 would
    # make some of them wait for a SYN retry.
    request_queue_size = 256

    def __init__(self, address: tuple[str, int], stub: StubServer) -> None:
        self.stub = stub
        super().__init__(address, _Handler)


class _Handler(BaseHTTPRequestHandler):
    """Routes one connection's requests to the owning :class:`StubServer`."""

    # HTTP/1.1 for keep-alive and chunked streaming, as Ollama serves.
    protocol_version = "HTTP/1.1"
    server_version = "ollama-stub"

    @property
    def stub(self) -> StubServer:
        return cast(_HTTPServer, self.server).stub

    def setup(self) -> None:
        super().setup()
        # Streams are many small writes; with Nagle's algorithm each one waits for the
        # client's delayed ACK (~40 ms), which would dwarf the latency benchmarks measure.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.stub._track(self.connection, add=True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.stub._track(self.connection, add=False)

    def log_message(self, format: str, *args: Any) -> None:
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
            self.stub._route(self, method, body)
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


class StubServer:
    """An Ollama look-alike on 127.0.0.1, served from a daemon thread.

    Example::

        with StubServer().start() as stub:
            llm = ChatOllama(model="stub-model", base_url=stub.url)
            llm.invoke("Cycle 1 begins.")
            assert stub.requests()[0]["body"]["model"] == "stub-model"

    Thread-safe: one lock guards the model list and the request record; the fault
    queue has its own.
    """

    def __init__(
        self,
        agent: Agent | None = None,
        *,
        models: Sequence[str] = DEFAULT_MODELS,
        embedding_models: Sequence[str] = DEFAULT_EMBEDDING_MODELS,
        host: str = "127.0.0.1",
        port: int = 0,
        latency_ms: float = 0,
        record: str | Path | None = None,
        faults: Iterable[Fault | Mapping[str, Any]] = (),
    ) -> None:
        """Configure the server; nothing listens until :meth:`start`.

        Args:
            agent: Who answers chat requests (default: ``SimulatedAgent()``).
            models: Chat model names to serve (capabilities ``completion``, ``tools``).
            embedding_models: Embedding model names to serve (capability ``embedding``).
            host: Interface to bind.
            port: Port to bind; 0 picks a free one (see :attr:`port` after start).
            latency_ms: Delay added to every ``/api/chat`` request, for benchmarks.
            record: If given, append every recorded request to this file as a JSON line.
            faults: Faults to queue from the start.
        """
        self.agent: Agent = agent if agent is not None else SimulatedAgent()
        self.host = host
        self.latency_ms = float(latency_ms)
        self.record_path = Path(record) if record is not None else None
        self._requested_port = port
        self._lock = threading.Lock()
        self._models: dict[str, _Model] = {}
        self._records: list[dict[str, Any]] = []
        self._next_n = 1
        self._faults = FaultQueue()
        self._faults.extend(faults)
        self._record_file: IO[str] | None = None
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._connections: set[socket.socket] = set()
        self.hide_capabilities = False
        """Answer `/api/show` without `capabilities`, as Ollama before 0.6 did."""
        for name in models:
            self.add_model(name)
        for name in embedding_models:
            self.add_model(name, embedding=True)

    @classmethod
    def from_scenario(cls, source: str | Path | Mapping[str, Any], **overrides: Any) -> StubServer:
        """Build a server from a scenario file, bundled scenario name or mapping.

        Args:
            source: See :func:`contreact.stub.agents.load_scenario`.
            **overrides: Constructor keyword arguments that win over the scenario
                (e.g. ``port=``, ``models=``, ``latency_ms=``, ``record=``).

        Returns:
            The (not yet started) server.
        """
        scenario = load_scenario(source)
        kwargs: dict[str, Any] = {
            "models": scenario.models,
            "embedding_models": scenario.embedding_models,
            "latency_ms": scenario.latency_ms,
            "faults": scenario.faults,
        }
        kwargs.update(overrides)
        agent = kwargs.pop("agent", scenario.agent)
        return cls(agent, **kwargs)

    # -- lifecycle -----------------------------------------------------------------

    def start(self) -> StubServer:
        """Bind and serve in a daemon thread.

        Returns:
            ``self``, so ``with StubServer().start() as s:`` and ``s = StubServer().start()``
            both read naturally.

        Raises:
            RuntimeError: If already started.
        """
        if self._httpd is not None:
            raise RuntimeError("stub server already started")
        self._stopping.clear()
        if self.record_path is not None:
            self.record_path.parent.mkdir(parents=True, exist_ok=True)
            self._record_file = self.record_path.open("a", encoding="utf-8")
        self._httpd = _HTTPServer((self.host, self._requested_port), self)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"ollama-stub:{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close every open connection; safe to call twice."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self._stopping.set()  # wakes sleeping delay faults
        httpd.shutdown()
        httpd.server_close()
        # Keep-alive connections would otherwise keep being served by their threads
        # after "stop", which would make "server went away" tests lie.
        with self._lock:
            connections = list(self._connections)
        for conn in connections:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        with self._lock:
            if self._record_file is not None:
                self._record_file.close()
                self._record_file = None

    def __enter__(self) -> StubServer:
        if self._httpd is None:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The bound port.

        Raises:
            RuntimeError: Before :meth:`start`.
        """
        if self._httpd is None:
            raise RuntimeError("stub server not started")
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """Base URL for clients, e.g. ``http://127.0.0.1:41234``."""
        return f"http://{self.host}:{self.port}"

    # -- state ---------------------------------------------------------------------

    def requests(self, path: str | None = "/api/chat") -> list[dict[str, Any]]:
        """Return recorded requests (copies), oldest first.

        Args:
            path: Only requests to this path; ``None`` for every ``/api/*`` request.

        Returns:
            ``[{"n", "path", "body", "fault", "status"}, ...]``.
        """
        with self._lock:
            records = [r for r in self._records if path is None or r["path"] == path]
            return copy.deepcopy(records)

    def add_faults(self, *faults: Fault | Mapping[str, Any]) -> None:
        """Queue faults (FIFO). See :mod:`contreact.stub.faults` for the kinds.

        Args:
            *faults: Faults or mappings such as ``{"kind": "http", "status": 503}``.
        """
        self._faults.extend(faults)

    def pending_faults(self) -> list[dict[str, Any]]:
        """Return the faults still queued, oldest first."""
        return [f.to_dict() for f in self._faults.pending()]

    def add_model(
        self,
        name: str,
        *,
        embedding: bool = False,
        capabilities: Sequence[str] | None = None,
    ) -> None:
        """Serve another model (replacing one of the same name).

        Args:
            name: Model name; ``x`` and ``x:latest`` are the same model, as in Ollama.
            embedding: Make it an embedding model rather than a chat model.
            capabilities: Explicit capabilities (e.g. ``["completion"]`` for a model
                without tool support); overrides ``embedding``.
        """
        if capabilities is None:
            capabilities = EMBEDDING_CAPABILITIES if embedding else CHAT_CAPABILITIES
        model = _Model(name=canonical_model_name(name), capabilities=tuple(capabilities))
        with self._lock:
            self._models[model.name] = model

    def remove_model(self, name: str) -> None:
        """Stop serving a model; requests for it then get Ollama's 404.

        Args:
            name: Model name, with or without tag.
        """
        with self._lock:
            self._models.pop(canonical_model_name(name), None)

    def models(self) -> list[str]:
        """Return the served model names (tagged, as ``/api/tags`` lists them)."""
        with self._lock:
            return sorted(self._models)

    def reset(self, *, faults: bool = True) -> None:
        """Clear the request record (numbering restarts at 1) and the fault queue.

        Args:
            faults: Also drop queued faults (default), so one test's leftovers cannot
                hit the next.
        """
        with self._lock:
            self._records.clear()
            self._next_n = 1
        if faults:
            self._faults.clear()

    # -- internals -----------------------------------------------------------------

    def _track(self, conn: socket.socket, *, add: bool) -> None:
        with self._lock:
            if add:
                self._connections.add(conn)
            else:
                self._connections.discard(conn)

    def _record(self, path: str, body: Any, fault: Fault | None, status: int) -> None:
        with self._lock:
            entry = {
                "n": self._next_n,
                "path": path,
                "body": body,
                "fault": fault.kind if fault else None,
                "status": status,
            }
            self._next_n += 1
            self._records.append(entry)
            if self._record_file is not None:
                self._record_file.write(json.dumps(entry) + "\n")
                self._record_file.flush()

    def _sleep(self, seconds: float) -> None:
        if seconds > 0:
            self._stopping.wait(seconds)

    def _lookup(self, name: Any) -> tuple[_Model | None, int, str]:
        """Resolve a request's model name to (model, error status, error text)."""
        if not isinstance(name, str) or not name.strip():
            return None, 400, "model is required"
        with self._lock:
            model = self._models.get(canonical_model_name(name))
        if model is None:
            return None, 404, f'model "{name}" not found, try pulling it first'
        return model, 200, ""

    def _route(self, h: _Handler, method: str, raw: bytes) -> None:
        parts = urlsplit(h.path)
        path = parts.path.rstrip("/") or "/"
        if path == "/" and method in ("GET", "HEAD"):
            h.send_bytes(200, b"Ollama is running", "text/plain; charset=utf-8")
            return
        if path.startswith("/_stub/"):
            self._control(h, method, path, parse_qs(parts.query), raw)
            return
        routes = {
            ("POST", "/api/chat"): self._chat,
            ("POST", "/api/embed"): self._embed,
            ("POST", "/api/show"): self._show,
            ("GET", "/api/tags"): self._tags,
            ("GET", "/api/version"): self._version,
            ("GET", "/api/ps"): self._ps,
        }
        handler = routes.get((method, path))
        if handler is None:
            if path.startswith("/api/"):
                self._record(path, None, None, 404)
            h.send_bytes(404, b"404 page not found", "text/plain")
            return
        handler(h, path, raw)

    @staticmethod
    def _decode(raw: bytes) -> tuple[Any, str]:
        """Decode a JSON object body; returns (body, error text)."""
        try:
            body = json.loads(raw or b"{}")
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            return None, f"invalid JSON body: {exc}"
        if not isinstance(body, dict):
            return body, "request body must be a JSON object"
        return body, ""

    # -- /api/chat -----------------------------------------------------------------

    def _chat(self, h: _Handler, path: str, raw: bytes) -> None:
        started = time.monotonic_ns()
        body, error = self._decode(raw)
        if error:
            self._record(path, body, None, 400)
            h.send_json(400, {"error": error})
            return
        stream = bool(body.get("stream", True))
        fault = self._faults.pop_for(path, body.get("model"))
        reply: Reply | None = None
        req: ChatRequest | None = None
        status = 200
        if fault is None or fault.kind in ("delay", "drop_midstream", "error_line"):
            model, status, error = self._lookup(body.get("model"))
            if model is not None and not {"completion", "tools"} & set(model.capabilities):
                status, error = 400, f'"{body["model"]}" does not support chat'
            elif model is not None and body.get("tools") and "tools" not in model.capabilities:
                status, error = (
                    400,
                    f"registry.ollama.ai/library/{model.name} does not support tools",
                )
            if status == 200:
                try:
                    req = ChatRequest.from_body(body)
                    reply = self.agent.respond(req)
                except ValueError as exc:
                    status, error = 400, str(exc)
                except Exception as exc:  # a broken agent is a 500, not a crash
                    log.exception("stub agent failed")
                    status, error = 500, f"stub agent failed: {exc!r}"
        self._record(path, body, fault, self._planned_status(fault, status, stream))

        if fault is not None and fault.kind == "drop":
            h.close_connection = True
            return
        self._sleep(self.latency_ms / 1000 + (fault.seconds if fault else 0.0))
        if fault is not None and fault.kind in ("http", "tool_parse_error"):
            if fault.body is not None:
                h.send_bytes(fault.status, fault.body.encode(), "application/json")
            else:
                h.send_json(fault.status, {"error": fault.error})
            return
        if status != 200 or reply is None or req is None:
            h.send_json(status, {"error": error})
            return
        lines = self._chat_lines(req, reply, started)
        if not stream:
            self._send_whole(h, req, reply, lines[-1], fault)
            return
        h.start_stream()
        if fault is not None and fault.kind in ("drop_midstream", "error_line"):
            h.write_line(lines[0])
            if fault.kind == "drop_midstream":
                # No terminating chunk: the client sees an incomplete chunked body.
                h.close_connection = True
                return
            h.write_line({"error": fault.error})
            h.end_stream()
            return
        for line in lines:
            h.write_line(line)
        h.end_stream()

    @staticmethod
    def _planned_status(fault: Fault | None, status: int, stream: bool) -> int:
        """The status the response will carry (0 when the connection is just dropped)."""
        if fault is None or fault.kind in ("delay", "drop_midstream"):
            return status
        if fault.kind == "drop":
            return 0
        if fault.kind == "error_line":
            return status if stream or status != 200 else 500
        return fault.status

    def _chat_lines(self, req: ChatRequest, reply: Reply, started_ns: int) -> list[dict[str, Any]]:
        """Build the NDJSON stream for ``reply``; the last line is the ``done`` line."""
        head = {"model": req.model, "created_at": _now_iso()}
        lines: list[dict[str, Any]] = []
        thinking = reply.thinking if req.thinking_requested else ""
        for piece in _split(thinking, 3):
            lines.append(
                {
                    **head,
                    "message": {"role": "assistant", "content": "", "thinking": piece},
                    "done": False,
                }
            )
        for piece in _split(reply.content, 4):
            lines.append(
                {**head, "message": {"role": "assistant", "content": piece}, "done": False}
            )
        if reply.tool_calls:
            calls = [
                {"function": {"name": c["name"], "arguments": c.get("arguments") or {}}}
                for c in reply.tool_calls
            ]
            lines.append(
                {
                    **head,
                    "message": {"role": "assistant", "content": "", "tool_calls": calls},
                    "done": False,
                }
            )
        prompt_text = "".join(
            content for m in req.messages if isinstance(content := m.get("content"), str)
        )
        output_text = (
            thinking + reply.content + (json.dumps(reply.tool_calls) if reply.tool_calls else "")
        )
        prompt_tokens = estimate_tokens(prompt_text)
        eval_tokens = estimate_tokens(output_text)
        prompt_ns = prompt_tokens * _PROMPT_NS_PER_TOKEN
        eval_ns = eval_tokens * _EVAL_NS_PER_TOKEN
        wall_ns = time.monotonic_ns() - started_ns
        lines.append(
            {
                **head,
                "message": {"role": "assistant", "content": ""},
                "done": True,
                "done_reason": reply.done_reason,
                "total_duration": max(wall_ns, _LOAD_NS + prompt_ns + eval_ns),
                "load_duration": _LOAD_NS,
                "prompt_eval_count": prompt_tokens,
                "prompt_eval_duration": prompt_ns,
                "eval_count": eval_tokens,
                "eval_duration": eval_ns,
            }
        )
        return lines

    @staticmethod
    def _send_whole(
        h: _Handler, req: ChatRequest, reply: Reply, done: dict[str, Any], fault: Fault | None
    ) -> None:
        """Answer a ``stream: false`` request with one JSON object."""
        message: dict[str, Any] = {"role": "assistant", "content": reply.content}
        if reply.thinking and req.thinking_requested:
            message["thinking"] = reply.thinking
        if reply.tool_calls:
            message["tool_calls"] = [
                {"function": {"name": c["name"], "arguments": c.get("arguments") or {}}}
                for c in reply.tool_calls
            ]
        obj = {**done, "message": message}
        if fault is not None and fault.kind == "error_line":
            # A non-streamed answer has no "mid-stream": Ollama reports it as a 500.
            h.send_json(500, {"error": fault.error})
            return
        data = json.dumps(obj).encode()
        if fault is not None and fault.kind == "drop_midstream":
            h.send_response(200)
            h.send_header("Content-Type", "application/json; charset=utf-8")
            h.send_header("Content-Length", str(len(data)))
            h.end_headers()
            h.wfile.write(data[: len(data) // 2])
            h.close_connection = True
            return
        h.send_bytes(200, data, "application/json; charset=utf-8")

    # -- /api/embed ----------------------------------------------------------------

    def _embed(self, h: _Handler, path: str, raw: bytes) -> None:
        started = time.monotonic_ns()
        body, error = self._decode(raw)
        if error:
            self._record(path, body, None, 400)
            h.send_json(400, {"error": error})
            return
        fault = self._faults.pop_for(path, body.get("model"))
        model, status, error = self._lookup(body.get("model"))
        texts: list[str] = []
        if model is not None and not model.is_embedding:
            status, error = 400, f'"{body["model"]}" does not support embeddings'
        if status == 200:
            inputs = body.get("input", [])
            texts = [inputs] if isinstance(inputs, str) else inputs
            if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
                status, error = 400, "invalid input type"
        planned = status
        if fault is not None and fault.kind == "drop":
            planned = 0
        elif fault is not None and fault.kind not in ("delay", "drop_midstream"):
            planned = fault.status
        self._record(path, body, fault, planned)

        if fault is not None and fault.kind == "drop":
            h.close_connection = True
            return
        self._sleep(fault.seconds if fault else 0.0)
        if fault is not None and fault.kind not in ("delay", "drop_midstream"):
            h.send_json(fault.status, {"error": fault.error})
            return
        if status != 200:
            h.send_json(status, {"error": error})
            return
        tokens = sum(estimate_tokens(t) for t in texts)
        obj = {
            "model": body["model"],
            "embeddings": [embed_text(t) for t in texts],
            "total_duration": max(time.monotonic_ns() - started, _LOAD_NS),
            "load_duration": _LOAD_NS,
            "prompt_eval_count": tokens,
        }
        data = json.dumps(obj).encode()
        if fault is not None and fault.kind == "drop_midstream":
            h.send_response(200)
            h.send_header("Content-Type", "application/json; charset=utf-8")
            h.send_header("Content-Length", str(len(data)))
            h.end_headers()
            h.wfile.write(data[: len(data) // 2])
            h.close_connection = True
            return
        h.send_bytes(200, data, "application/json; charset=utf-8")

    # -- metadata endpoints --------------------------------------------------------

    @staticmethod
    def _details(model: _Model) -> dict[str, Any]:
        family = "stub-embed" if model.is_embedding else "stub"
        return {
            "parent_model": "",
            "format": "gguf",
            "family": family,
            "families": [family],
            "parameter_size": "137M" if model.is_embedding else "8B",
            "quantization_level": "F16" if model.is_embedding else "Q4_K_M",
        }

    @staticmethod
    def _digest(model: _Model) -> str:
        return hashlib.sha256(model.name.encode()).hexdigest()

    def _tags(self, h: _Handler, path: str, raw: bytes) -> None:
        self._record(path, None, None, 200)
        with self._lock:
            models = sorted(self._models.values(), key=lambda m: m.name)
        h.send_json(
            200,
            {
                "models": [
                    {
                        "name": m.name,
                        "model": m.name,
                        "modified_at": "2025-01-01T00:00:00Z",
                        "size": 274_302_450 if m.is_embedding else 4_920_753_328,
                        "digest": self._digest(m),
                        "details": self._details(m),
                    }
                    for m in models
                ]
            },
        )

    def _show(self, h: _Handler, path: str, raw: bytes) -> None:
        body, error = self._decode(raw)
        if error:
            self._record(path, body, None, 400)
            h.send_json(400, {"error": error})
            return
        name = body.get("model") or body.get("name")
        model, status, error = self._lookup(name)
        if model is None:
            if status == 404:
                error = f"model '{name}' not found"
            self._record(path, body, None, status)
            h.send_json(status, {"error": error})
            return
        self._record(path, body, None, 200)
        arch = "stub-embed" if model.is_embedding else "stub"
        h.send_json(
            200,
            {
                "license": "stub",
                "modelfile": f"# Modelfile generated by the contreact stub\nFROM {model.name}\n",
                "parameters": "",
                "template": "{{ .Prompt }}",
                "details": self._details(model),
                "model_info": {
                    "general.architecture": arch,
                    "general.parameter_count": 137_000_000 if model.is_embedding else 8_000_000_000,
                    f"{arch}.context_length": 8192 if model.is_embedding else 32768,
                    f"{arch}.embedding_length": 256 if model.is_embedding else 4096,
                },
                "digest": self._digest(model),
                "modified_at": "2025-01-01T00:00:00Z",
                **({} if self.hide_capabilities else {"capabilities": list(model.capabilities)}),
            },
        )

    def _version(self, h: _Handler, path: str, raw: bytes) -> None:
        self._record(path, None, None, 200)
        h.send_json(200, {"version": OLLAMA_VERSION})

    def _ps(self, h: _Handler, path: str, raw: bytes) -> None:
        self._record(path, None, None, 200)
        h.send_json(200, {"models": []})

    # -- /_stub/ control -----------------------------------------------------------

    def _control(
        self, h: _Handler, method: str, path: str, query: dict[str, list[str]], raw: bytes
    ) -> None:
        if path == "/_stub/requests" and method == "GET":
            only = query.get("path", [None])[0]
            h.send_json(200, self.requests(only))
            return
        if path == "/_stub/faults" and method == "GET":
            h.send_json(200, self.pending_faults())
            return
        if method != "POST":
            h.send_json(405, {"error": f"{method} not allowed on {path}"})
            return
        try:
            body = json.loads(raw or b"null")
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            h.send_json(400, {"error": f"invalid JSON body: {exc}"})
            return
        try:
            if path == "/_stub/reset":
                keep = isinstance(body, dict) and body.get("faults") is False
                self.reset(faults=not keep)
                h.send_json(200, {"ok": True})
            elif path == "/_stub/faults":
                items = [body] if isinstance(body, dict) else body
                if not isinstance(items, list):
                    raise ValueError("expected a fault or a list of faults")
                self.add_faults(*items)
                h.send_json(200, {"queued": len(self._faults)})
            elif path == "/_stub/models":
                self._control_models(body)
                h.send_json(200, {"models": self.models()})
            else:
                h.send_json(404, {"error": f"unknown control endpoint {path}"})
        except (ValueError, TypeError) as exc:
            h.send_json(400, {"error": str(exc)})

    def _control_models(self, body: Any) -> None:
        if not isinstance(body, dict):
            raise ValueError('expected {"add": [...], "remove": [...]}')
        for item in body.get("add") or []:
            if isinstance(item, str):
                self.add_model(item)
            elif isinstance(item, dict) and isinstance(item.get("name"), str):
                self.add_model(
                    item["name"],
                    embedding=bool(item.get("embedding")),
                    capabilities=item.get("capabilities"),
                )
            else:
                raise ValueError(f"cannot add model {item!r}")
        for item in body.get("remove") or []:
            self.remove_model(str(item))
