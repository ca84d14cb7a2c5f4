"""The stub's inference endpoints, ``/api/chat`` and ``/api/embed``, and how faults play on them.

These are the endpoints whose failures the engine must survive, so this is where a queued
fault (:mod:`contreact.stub.faults`) turns into what a client would see from a failing
Ollama: an HTTP error, a hang, a dropped connection, a stream cut short or ended by an
error line. The request is recorded first, with the status the answer will carry, so a
test can read what happened even when the client never got an answer.
"""

from __future__ import annotations

import json
import logging
import time
from typing import TYPE_CHECKING, Any

from contreact.stub.faults import Fault
from contreact.stub.ollama_api import (
    ChatRequest,
    Reply,
    chat_lines,
    decode_body,
    embed_body,
    now_iso,
    whole_chat_body,
)

if TYPE_CHECKING:
    from contreact.stub.httpd import StubHandler
    from contreact.stub.server import StubServer

__all__ = ["chat", "embed"]

log = logging.getLogger("contreact.stub.server")


def chat(stub: StubServer, h: StubHandler, path: str, raw: bytes) -> None:
    """Answer an ``/api/chat`` request with ``stub``'s agent, or with the next fault."""
    started = time.monotonic_ns()
    body, error = decode_body(raw)
    if error:
        stub.record(path, body, None, 400)
        h.send_json(400, {"error": error})
        return
    stream = bool(body.get("stream", True))
    fault = stub.next_fault(path, body.get("model"))
    reply: Reply | None = None
    req: ChatRequest | None = None
    status = 200
    if fault is None or fault.kind in ("delay", "drip", "drop_midstream", "error_line"):
        model, status, error = stub.lookup(body.get("model"))
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
                reply = stub.agent.respond(req)
            except ValueError as exc:
                status, error = 400, str(exc)
            except Exception as exc:  # a broken agent is a 500, not a crash
                log.exception("stub agent failed")
                status, error = 500, f"stub agent failed: {exc!r}"
    stub.record(path, body, fault, _planned_status(fault, status, stream))

    if fault is not None and fault.kind == "drop":
        h.close_connection = True
        return
    dripping = fault is not None and fault.kind == "drip"
    stub.pause(stub.latency_ms / 1000 + (fault.seconds if fault and not dripping else 0.0))
    if fault is not None and fault.kind in ("http", "tool_parse_error"):
        if fault.body is not None:
            h.send_bytes(fault.status, fault.body.encode(), "application/json")
        else:
            h.send_json(fault.status, {"error": fault.error})
        return
    if status != 200 or reply is None or req is None:
        h.send_json(status, {"error": error})
        return
    lines = chat_lines(req, reply, started, reply.usage)
    if fault is not None and fault.kind == "drip" and not stream:
        stub.pause(fault.seconds * fault.chunks)
    if not stream:
        _send_whole(h, req, reply, lines[-1], fault)
        return
    h.start_stream()
    if fault is not None and fault.kind == "drip":
        for _ in range(fault.chunks):
            dot = {"role": "assistant", "content": "."}
            h.write_line(
                {"model": req.model, "created_at": now_iso(), "message": dot, "done": False}
            )
            h.wfile.flush()
            stub.pause(fault.seconds)
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


def _planned_status(fault: Fault | None, status: int, stream: bool) -> int:
    """The status the response will carry (0 when the connection is just dropped)."""
    if fault is None or fault.kind in ("delay", "drip", "drop_midstream"):
        return status
    if fault.kind == "drop":
        return 0
    if fault.kind == "error_line":
        return status if stream or status != 200 else 500
    return fault.status


def _send_whole(
    h: StubHandler, req: ChatRequest, reply: Reply, done: dict[str, Any], fault: Fault | None
) -> None:
    """Answer a ``stream: false`` request with one JSON object."""
    obj = whole_chat_body(req, reply, done)
    if fault is not None and fault.kind == "error_line":
        # A non-streamed answer has no "mid-stream": Ollama reports it as a 500.
        h.send_json(500, {"error": fault.error})
        return
    data = json.dumps(obj).encode()
    if fault is not None and fault.kind == "drop_midstream":
        h.send_half_json(data)
        return
    h.send_bytes(200, data, "application/json; charset=utf-8")


def embed(stub: StubServer, h: StubHandler, path: str, raw: bytes) -> None:
    """Answer an ``/api/embed`` request with the stub's embeddings, or with the next fault."""
    started = time.monotonic_ns()
    body, error = decode_body(raw)
    if error:
        stub.record(path, body, None, 400)
        h.send_json(400, {"error": error})
        return
    fault = stub.next_fault(path, body.get("model"))
    model, status, error = stub.lookup(body.get("model"))
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
    stub.record(path, body, fault, planned)

    if fault is not None and fault.kind == "drop":
        h.close_connection = True
        return
    stub.pause(fault.seconds if fault else 0.0)
    if fault is not None and fault.kind not in ("delay", "drop_midstream"):
        h.send_json(fault.status, {"error": fault.error})
        return
    if status != 200:
        h.send_json(status, {"error": error})
        return
    obj = embed_body(body["model"], texts, started)
    data = json.dumps(obj).encode()
    if fault is not None and fault.kind == "drop_midstream":
        h.send_half_json(data)
        return
    h.send_bytes(200, data, "application/json; charset=utf-8")
