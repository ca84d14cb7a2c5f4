"""Fault injection for the stub server: the failures a real Ollama produces, on demand.

The engine must survive HTTP 5xx/429, hung requests, dropped connections, error lines
in the middle of a stream and Ollama's own "error parsing tool call" response. None of
those can be provoked reliably from a real server, so tests queue them here and the
next matching request fails in exactly that way, over real HTTP, so the real client
raises the real exception.

The queue is FIFO. Each ``/api/chat`` or ``/api/embed`` request takes at most one fault:
the first queued fault that matches it. A fault matches ``/api/chat`` unless it names
another ``path`` (``"*"`` matches both), and any model unless it names one; faults a
request does not match stay queued for later requests.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from contreact.stub.ollama_api import canonical_model_name
from contreact.text.messages import cut

__all__ = [
    "DEFAULT_FAULT_PATH",
    "FAULT_KINDS",
    "TOOL_PARSE_ERROR_MESSAGE",
    "Fault",
    "FaultQueue",
    "parse_faults",
]

FAULT_KINDS = frozenset(
    {"http", "delay", "drip", "drop", "drop_midstream", "error_line", "tool_parse_error"}
)
DEFAULT_FAULT_PATH = "/api/chat"
FAULTABLE_PATHS = frozenset({"/api/chat", "/api/embed"})

# Verbatim shape of what Ollama's server says when a model emits a truncated tool call.
TOOL_PARSE_ERROR_MESSAGE = (
    'error parsing tool call: raw=\'{"name": "write", "arguments": {"key": \', '
    "err=unexpected end of JSON input"
)

# Ollama's own wording where it has one, so log lines in tests look like the real thing.
_DEFAULT_HTTP_ERRORS = {
    400: "bad request",
    404: "not found",
    429: "too many requests",
    500: "internal server error",
    502: "bad gateway",
    503: "server busy, please try again.  maximum pending requests exceeded",
}

_FAULT_KEYS = frozenset(
    {"kind", "status", "error", "body", "seconds", "chunks", "path", "model", "times"}
)


@dataclass(frozen=True)
class Fault:
    """One queued failure.

    Attributes:
        kind: ``http`` | ``delay`` | ``drip`` | ``drop`` | ``drop_midstream`` |
            ``error_line`` | ``tool_parse_error``.
        status: HTTP status for ``http`` (and 500 for ``tool_parse_error``).
        error: Error text for ``http`` and ``error_line``.
        body: For ``http``: the raw response body instead of ``{"error": error}`` (a JSON
            list, an HTML page, nothing): servers and proxies answer errors in any shape.
        seconds: Sleep before answering, for ``delay``; between chunks, for ``drip``.
        chunks: For ``drip``: how many one-dot chunks trickle out, ``seconds`` apart,
            before the answer (a slow link, or a model stuck repeating itself).
        path: Request path it applies to (default ``/api/chat``; ``"*"`` = any).
        model: Only requests for this model (tag-insensitive), or any when ``None``.
    """

    kind: str
    status: int = 500
    error: str = ""
    body: str | None = None
    seconds: float = 0.0
    chunks: int = 0
    path: str = DEFAULT_FAULT_PATH
    model: str | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Fault:
        """Validate a fault given as JSON/YAML.

        Args:
            data: ``{"kind": ..., ...}``; ``times`` is handled by :func:`parse_faults`.

        Returns:
            The fault.

        Raises:
            ValueError: On an unknown kind, unknown key or bad value.
        """
        unknown = set(data) - _FAULT_KEYS
        if unknown:
            raise ValueError(f"fault: unknown key(s) {sorted(unknown)}")
        kind = data.get("kind")
        if kind not in FAULT_KINDS:
            raise ValueError(f"fault: kind must be one of {sorted(FAULT_KINDS)}, not {kind!r}")
        status = data.get("status", 500)
        if not isinstance(status, int) or not 400 <= status <= 599:
            raise ValueError(f"fault: status must be an HTTP error code 400-599, not {status!r}")
        seconds = data.get("seconds", 0.0)
        if not isinstance(seconds, int | float) or seconds < 0:
            raise ValueError("fault: seconds must be a non-negative number")
        path = str(data.get("path") or DEFAULT_FAULT_PATH)
        if path != "*" and path not in FAULTABLE_PATHS:
            raise ValueError(f"fault: path must be one of {sorted(FAULTABLE_PATHS)} or '*'")
        if kind in ("delay", "drip") and "seconds" not in data:
            raise ValueError(f"fault: a {kind} needs 'seconds'")
        chunks = data.get("chunks", 25 if kind == "drip" else 0)
        if not isinstance(chunks, int) or isinstance(chunks, bool) or chunks < 0:
            raise ValueError("fault: chunks must be a non-negative integer")
        error = data.get("error")
        if error is None:
            if kind == "tool_parse_error":
                error = TOOL_PARSE_ERROR_MESSAGE
            elif kind == "error_line":
                error = "an error was encountered while running the model"
            else:
                error = _DEFAULT_HTTP_ERRORS.get(status, "error")
        model = data.get("model")
        return cls(
            kind=kind,
            status=500 if kind == "tool_parse_error" else status,
            error=str(error),
            body=None if data.get("body") is None else str(data["body"]),
            seconds=float(seconds),
            chunks=chunks,
            path=path,
            model=str(model) if model else None,
        )

    def to_dict(self) -> dict[str, Any]:
        """Return the fault as JSON-ready data."""
        return asdict(self)

    def matches(self, path: str, model: str | None) -> bool:
        """Whether a request to ``path`` for ``model`` should take this fault.

        Args:
            path: The request path.
            model: The request's model name, if any.

        Returns:
            True when both path and model filters accept the request.
        """
        if self.path != "*" and self.path != path:
            return False
        if self.model is None:
            return True
        return model is not None and canonical_model_name(model) == canonical_model_name(self.model)


def parse_faults(items: Iterable[Fault | Mapping[str, Any]]) -> list[Fault]:
    """Validate faults, expanding ``times: N`` into N copies.

    Args:
        items: Faults or fault mappings.

    Returns:
        The validated faults in order.

    Raises:
        ValueError: If any fault is invalid (nothing is returned then).
    """
    out: list[Fault] = []
    for item in items:
        if isinstance(item, Fault):
            out.append(item)
            continue
        if not isinstance(item, Mapping):
            raise ValueError(f"fault: expected a mapping, got {cut(repr(item))}")
        times = item.get("times", 1)
        if not isinstance(times, int) or times < 1:
            raise ValueError("fault: times must be a positive integer")
        fault = Fault.from_dict(item)
        out.extend([fault] * times)
    return out


class FaultQueue:
    """A thread-safe FIFO of faults, popped by the first request each one matches."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: deque[Fault] = deque()

    def extend(self, faults: Iterable[Fault | Mapping[str, Any]]) -> None:
        """Append faults to the end of the queue (all or none, if one is invalid).

        Args:
            faults: Faults or fault mappings.
        """
        parsed = parse_faults(faults)
        with self._lock:
            self._queue.extend(parsed)

    def pop_for(self, path: str, model: str | None) -> Fault | None:
        """Remove and return the first queued fault matching the request, if any.

        Args:
            path: The request path.
            model: The request's model name.

        Returns:
            The fault, or ``None`` when no queued fault matches.
        """
        with self._lock:
            for i, fault in enumerate(self._queue):
                if fault.matches(path, model):
                    del self._queue[i]
                    return fault
        return None

    def pending(self) -> list[Fault]:
        """Return the queued faults, oldest first."""
        with self._lock:
            return list(self._queue)

    def clear(self) -> None:
        """Drop every queued fault."""
        with self._lock:
            self._queue.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._queue)
