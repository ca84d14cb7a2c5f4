"""An Ollama-compatible HTTP server for the demo, the tests and the benchmarks.

No Ollama binary or model weights exist where this project is built and tested, yet the
engine must be exercised through the real ``langchain_ollama.ChatOllama`` client over
real HTTP: its streaming parser, its tool-call handling and its exceptions are part of
what is being tested. So the stub speaks enough of Ollama's API (``/api/chat``
streamed and not, ``/api/tags``, ``/api/show``, ``/api/version``, ``/api/embed``) for
that client, answers with an :class:`~contreact.stub.agents.Agent`, and fails on demand
through the fault queue (:mod:`contreact.stub.faults`). This module owns the server's
life, its state (models, faults, the request record) and the routing; the inference
endpoints are in :mod:`contreact.stub.inference`.

Control endpoints under ``/_stub/`` let tests and subprocess users inspect recorded
requests, queue faults and change the model list while the server runs.

Standard library only (``http.server``), so starting one costs milliseconds.
"""

from __future__ import annotations

import base64
import functools
import socket
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from contreact.stub.agents import Agent, SimulatedAgent
from contreact.stub.control import handle_control
from contreact.stub.faults import Fault, FaultQueue
from contreact.stub.httpd import StubHandler, StubHTTPServer
from contreact.stub.inference import chat, embed
from contreact.stub.model_cards import ModelCard, show_body, stub_card, tags_body, version_body
from contreact.stub.ollama_api import (
    CHAT_CAPABILITIES,
    DEFAULT_EMBEDDING_MODELS,
    DEFAULT_MODELS,
    EMBEDDING_CAPABILITIES,
    ServedModel,
    canonical_model_name,
    decode_body,
)
from contreact.stub.request_log import RequestLog
from contreact.stub.scenarios import load_scenario

__all__ = ["StubServer"]


class StubServer:
    """An Ollama look-alike on 127.0.0.1, served from a daemon thread.

    Example::

        with StubServer().start() as stub:
            llm = ChatOllama(model="stub-model", base_url=stub.url)
            llm.invoke("Cycle 1 begins.")
            assert stub.requests()[0]["body"]["model"] == "stub-model"

    Thread-safe: one lock guards the model list; the request record and the fault queue
    have their own.
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
        basic_auth: tuple[str, str] | None = None,
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
            basic_auth: ``(user, password)``: answer HTTP 401 to any Ollama API request
                without them, as an authenticating proxy in front of Ollama does.
        """
        self.agent: Agent = agent if agent is not None else SimulatedAgent()
        self.host = host
        self.latency_ms = float(latency_ms)
        self._authorization = (
            None
            if basic_auth is None
            else "Basic " + base64.b64encode(":".join(basic_auth).encode()).decode()
        )
        self._log = RequestLog(record)
        self._requested_port = port
        self._lock = threading.Lock()
        self._models: dict[str, ServedModel] = {}
        self._cards: dict[str, ModelCard] = {}
        self._faults = FaultQueue()
        self._faults.extend(faults)
        self._httpd: StubHTTPServer | None = None
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
        self._log.open()
        self._httpd = StubHTTPServer((self.host, self._requested_port), self)
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
        self._log.close()

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
        return self._log.entries(path)

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
        card: ModelCard | None = None,
    ) -> None:
        """Serve another model (replacing one of the same name).

        Args:
            name: Model name; ``x`` and ``x:latest`` are the same model, as in Ollama.
            embedding: Make it an embedding model rather than a chat model.
            capabilities: Explicit capabilities (e.g. ``["completion"]`` for a model
                without tool support); overrides ``embedding``.
            card: What ``/api/tags`` and ``/api/show`` say about it (family, size,
                template, ...); default: a made-up 8B chat model or 137M embedder.
        """
        if capabilities is None:
            capabilities = EMBEDDING_CAPABILITIES if embedding else CHAT_CAPABILITIES
        model = ServedModel(name=canonical_model_name(name), capabilities=tuple(capabilities))
        with self._lock:
            self._models[model.name] = model
            if card is not None:
                self._cards[model.name] = card
            else:
                self._cards.pop(model.name, None)

    def card(self, model: ServedModel) -> ModelCard:
        """What the metadata endpoints say about ``model``."""
        with self._lock:
            card = self._cards.get(model.name)
        return card if card is not None else stub_card(model)

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
        self._log.clear()
        if faults:
            self._faults.clear()

    # -- for the handler and the endpoints ------------------------------------------

    def track(self, conn: socket.socket, *, add: bool) -> None:
        """Note an open (``add``) or closed connection, so :meth:`stop` can shut it down."""
        with self._lock:
            if add:
                self._connections.add(conn)
            else:
                self._connections.discard(conn)

    def record(self, path: str, body: Any, fault: Fault | None, status: int) -> None:
        """Record one request to the Ollama API (see :meth:`requests`)."""
        self._log.add(path, body, fault, status)

    def next_fault(self, path: str, model: Any) -> Fault | None:
        """Take the queued fault that applies to a request to ``path`` for ``model``, if any."""
        return self._faults.pop_for(path, model)

    def pause(self, seconds: float) -> None:
        """Wait ``seconds`` (a latency or a delay fault), cut short by :meth:`stop`."""
        if seconds > 0:
            self._stopping.wait(seconds)

    def lookup(self, name: Any) -> tuple[ServedModel | None, int, str]:
        """Resolve a request's model name to (model, error status, error text)."""
        if not isinstance(name, str) or not name.strip():
            return None, 400, "model is required"
        with self._lock:
            model = self._models.get(canonical_model_name(name))
        if model is None:
            return None, 404, f'model "{name}" not found, try pulling it first'
        return model, 200, ""

    def route(self, h: StubHandler, method: str, raw: bytes) -> None:
        """Answer one request whose body has been read (called by the handler)."""
        parts = urlsplit(h.path)
        path = parts.path.rstrip("/") or "/"
        if path.startswith("/_stub/"):
            handle_control(self, h, method, path, parse_qs(parts.query), raw)
            return
        if (
            self._authorization is not None
            and h.headers.get("Authorization") != self._authorization
        ):
            self.record(path, None, None, 401)
            h.send_json(401, {"error": "unauthorized"})
            return
        if path == "/" and method in ("GET", "HEAD"):
            h.send_bytes(200, b"Ollama is running", "text/plain; charset=utf-8")
            return
        routes: dict[tuple[str, str], Callable[[StubHandler, str, bytes], None]] = {
            ("POST", "/api/chat"): functools.partial(chat, self),
            ("POST", "/api/embed"): functools.partial(embed, self),
            ("POST", "/api/show"): self._show,
            ("GET", "/api/tags"): self._tags,
            ("GET", "/api/version"): self._version,
            ("GET", "/api/ps"): self._ps,
        }
        handler = routes.get((method, path))
        if handler is None:
            if path.startswith("/api/"):
                self.record(path, None, None, 404)
            h.send_bytes(404, b"404 page not found", "text/plain")
            return
        handler(h, path, raw)

    # -- metadata endpoints --------------------------------------------------------

    def _tags(self, h: StubHandler, path: str, raw: bytes) -> None:
        self.record(path, None, None, 200)
        with self._lock:
            models = sorted(self._models.values(), key=lambda m: m.name)
        h.send_json(200, tags_body([(m, self.card(m)) for m in models]))

    def _show(self, h: StubHandler, path: str, raw: bytes) -> None:
        body, error = decode_body(raw)
        if error:
            self.record(path, body, None, 400)
            h.send_json(400, {"error": error})
            return
        name = body.get("model") or body.get("name")
        model, status, error = self.lookup(name)
        if model is None:
            if status == 404:
                error = f"model '{name}' not found"
            self.record(path, body, None, status)
            h.send_json(status, {"error": error})
            return
        self.record(path, body, None, 200)
        h.send_json(
            200, show_body(model, self.card(model), capabilities=not self.hide_capabilities)
        )

    def _version(self, h: StubHandler, path: str, raw: bytes) -> None:
        self.record(path, None, None, 200)
        h.send_json(200, version_body())

    def _ps(self, h: StubHandler, path: str, raw: bytes) -> None:
        self.record(path, None, None, 200)
        h.send_json(200, {"models": []})
