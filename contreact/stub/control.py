"""The stub's control endpoints under ``/_stub/``.

Tests and subprocess users (``python -m contreact.stub``) drive a running server over
HTTP: read the recorded requests, queue faults, reset, change the model list. These
are not Ollama's API, so they live apart from it.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from contreact.stub.httpd import StubHandler
    from contreact.stub.server import StubServer

__all__ = ["handle_control"]


def handle_control(
    stub: StubServer,
    h: StubHandler,
    method: str,
    path: str,
    query: dict[str, list[str]],
    raw: bytes,
) -> None:
    """Answer a request under ``/_stub/`` for ``stub``."""
    if path == "/_stub/requests" and method == "GET":
        only = query.get("path", [None])[0]
        h.send_json(200, stub.requests(only))
        return
    if path == "/_stub/faults" and method == "GET":
        h.send_json(200, stub.pending_faults())
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
            stub.reset(faults=not keep)
            h.send_json(200, {"ok": True})
        elif path == "/_stub/faults":
            items = [body] if isinstance(body, dict) else body
            if not isinstance(items, list):
                raise ValueError("expected a fault or a list of faults")
            stub.add_faults(*items)
            h.send_json(200, {"queued": len(stub.pending_faults())})
        elif path == "/_stub/models":
            _control_models(stub, body)
            h.send_json(200, {"models": stub.models()})
        else:
            h.send_json(404, {"error": f"unknown control endpoint {path}"})
    except (ValueError, TypeError) as exc:
        h.send_json(400, {"error": str(exc)})


def _control_models(stub: StubServer, body: Any) -> None:
    if not isinstance(body, dict):
        raise ValueError('expected {"add": [...], "remove": [...]}')
    for item in body.get("add") or []:
        if isinstance(item, str):
            stub.add_model(item)
        elif isinstance(item, dict) and isinstance(item.get("name"), str):
            stub.add_model(
                item["name"],
                embedding=bool(item.get("embedding")),
                capabilities=item.get("capabilities"),
            )
        else:
            raise ValueError(f"cannot add model {item!r}")
    for item in body.get("remove") or []:
        stub.remove_model(str(item))
