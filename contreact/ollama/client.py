"""Talking to Ollama: the ChatOllama client, error classes, and retries with backoff.

ChatOllama streams by default, waits forever by default and never retries. Local
servers drop connections while loading a model, answer 5xx under memory pressure, and
send an error line in the middle of a stream; those are retried with exponential backoff
and jitter. Permanent errors (model missing, bad request, auth) are not: the run stops
with a one-line reason naming the model and host, its checkpoint intact for `resume`.
"""

from __future__ import annotations

import json
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import httpx
import ollama
from langchain_ollama import ChatOllama

from contreact.errors import detail
from contreact.ollama import deadline as call_deadline
from contreact.ollama.credentials import ollama_auth
from contreact.ollama.server_numbers import checked_stream

T = TypeVar("T")

ErrorKind = Literal[
    "rate_limited",
    "timeout",
    "connection",
    "server",
    "malformed",
    "context_too_long",
    "model_missing",
    "bad_request",
    "auth",
    "unknown",
]

TRANSIENT: frozenset[ErrorKind] = frozenset(
    {"rate_limited", "timeout", "connection", "server", "malformed"}
)
SERVER_TOOL_PARSE_ERROR = "error parsing tool call"


@dataclass
class ModelCallError(Exception):
    """A model call that failed, classified, with a one-line explanation."""

    kind: ErrorKind
    message: str
    attempts: int = 1
    cause: str = ""
    """The client's exception class: for `--debug`, never part of the message."""

    def __str__(self) -> str:
        return self.message

    @property
    def transient(self) -> bool:
        """Whether retrying could help."""
        return self.kind in TRANSIENT


def classify(exc: BaseException, *, model: str, host: str, timeout_s: float) -> ModelCallError:
    """Map a client exception to an error class and a one-line message."""
    if isinstance(exc, ModelCallError):
        return exc
    if isinstance(exc, httpx.TimeoutException):
        return timed_out(model=model, host=host, timeout_s=timeout_s)
    if isinstance(exc, httpx.ConnectError | ConnectionError):
        return ModelCallError(
            "connection",
            f"cannot reach Ollama at {host} ({_first_line(exc)}); is `ollama serve` running?",
        )
    if isinstance(exc, httpx.TransportError):
        return ModelCallError(
            "connection", f"connection to Ollama at {host} broke: {_first_line(exc)}"
        )
    if isinstance(exc, ollama.ResponseError):
        status, text = exc.status_code, _first_line(exc.error)
        lowered = text.lower()
        if status == 404 or "not found" in lowered and "model" in lowered:
            return ModelCallError(
                "model_missing",
                f"model {model!r} not found on Ollama at {host} (try `ollama pull {model}`)",
            )
        if "context" in lowered and ("length" in lowered or "exceed" in lowered):
            return ModelCallError(
                "context_too_long", f"prompt too long for model {model!r} at {host}: {text}"
            )
        if status == 429:
            return ModelCallError("rate_limited", f"Ollama at {host} is rate limiting: {text}")
        if status in (401, 403):
            return ModelCallError(
                "auth",
                f"Ollama at {host} refused access (HTTP {status}): {text}; a proxy that asks "
                "for a password takes it in the host URL (http://user:password@host:port)",
            )
        if status == -1 or status >= 500:
            where = "mid-stream error" if status == -1 else f"HTTP {status}"
            return ModelCallError(
                "server", f"Ollama at {host} failed ({where}) for model {model!r}: {text}"
            )
        return ModelCallError(
            "bad_request",
            f"Ollama at {host} rejected the request for model {model!r} (HTTP {status}): {text}",
        )
    if _unreadable_answer(exc):
        return ModelCallError(
            "malformed",
            f"Ollama at {host} sent an answer for model {model!r} that cannot be read "
            f"({_what_is_unreadable(exc)}); if it persists, check the server and any proxy "
            "in front of it",
        )
    return ModelCallError(
        "unknown",
        f"model call to {model!r} at {host} failed unexpectedly: {detail(exc)} "
        "(rerun with --debug for the traceback)",
    )


_UNION_TAG = re.compile(r"^(str|int|float|bool|list|dict|none|[a-z-]+\[.*\])$")


def _what_is_unreadable(exc: BaseException) -> str:
    """What was wrong with an answer the client could not read, in a reader's words."""
    if isinstance(exc, json.JSONDecodeError):
        return f"a line that is not JSON: {exc.msg} at character {exc.pos}"
    if isinstance(exc, RecursionError):
        return "JSON nested too deeply to read"
    if isinstance(exc, UnicodeError):
        return "text that is not valid Unicode"
    errors = getattr(exc, "errors", None)
    if callable(errors):  # pydantic's ValidationError: the first field that does not fit
        try:
            first = errors()[0]
            # The location without pydantic's union tags (`content.str`: the str branch).
            parts = [str(p) for p in first["loc"] if not _UNION_TAG.match(str(p))]
            where = ".".join(parts) or "the answer"
            return f"{where} does not fit Ollama's format: {first['msg']}"
        except (TypeError, LookupError, ValueError):
            pass
    return f"not in Ollama's format: {detail(exc)}"


_ANSWER_READERS = ("/ollama/_", "/langchain_ollama/", "/pydantic/", "/langchain_core/messages/")
"""Where the server's answer is decoded and validated: the ollama client, ChatOllama
and the message classes they build."""


def within_deadline(call: Callable[[], T], seconds: float, *, model: str, host: str) -> T:
    """Run one model call with `seconds` for all of it; past that, a (transient) timeout.

    The deadline shuts the call's connection down, so the client raises whatever a
    broken stream makes it raise; that is reported as what it is, the deadline.
    """
    with call_deadline.call_deadline(seconds) as deadline:
        try:
            return call()
        except Exception as exc:
            if deadline.expired:
                error = timed_out(model=model, host=host, timeout_s=seconds)
                error.cause = _class_of(exc)
                raise error from exc
            raise


def timed_out(*, model: str, host: str, timeout_s: float) -> ModelCallError:
    """The one timeout, whichever limit tripped: the deadline or a single read."""
    return ModelCallError(
        "timeout",
        f"Ollama at {host} did not finish answering within {timeout_s:g} s (model {model}); "
        "raise ollama.timeout_s for a slow model or link",
    )


def _class_of(exc: BaseException) -> str:
    return f"{type(exc).__module__}.{type(exc).__qualname__}"


def _unreadable_answer(exc: BaseException) -> bool:
    """Whether `exc` came from decoding or validating the server's answer.

    A line that is not JSON (a proxy's HTML, a stream cut mid-line), a JSON list where
    an object belongs, a message whose content is `null`, 10,000-deep nesting, a lone
    surrogate that the message classes refuse: the answer is unusable, not the request,
    so it is retried like a server error (a model samples afresh, a proxy recovers).
    """
    if not isinstance(exc, ValueError | TypeError | AttributeError | RecursionError):
        return False
    tb = exc.__traceback__
    while tb is not None:
        if any(part in tb.tb_frame.f_code.co_filename for part in _ANSWER_READERS):
            return True
        tb = tb.tb_next
    return False


def _first_line(value: object) -> str:
    text = str(value).strip()
    return text.splitlines()[0] if text else "no detail"


def is_server_tool_parse_error(exc: BaseException) -> bool:
    """Ollama's own tool-call parser failed: the model's output was malformed, not the server."""
    return isinstance(exc, ollama.ResponseError) and SERVER_TOOL_PARSE_ERROR in str(exc.error)


def is_empty_stream(exc: BaseException) -> bool:
    """ChatOllama raises this when Ollama only sent `done_reason: load` chunks."""
    return isinstance(exc, ValueError) and "No data received" in str(exc)


@dataclass
class RetryPolicy:
    """Exponential backoff with jitter, doubling from a second, capped, within a total budget."""

    retries: int = 4
    budget_s: float = 60.0
    base_s: float = 1.0
    cap_s: float = 16.0
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic
    rng: random.Random = field(default_factory=random.Random)

    def delay(self, attempt: int) -> float:
        """Seconds to wait before retry number `attempt` (1-based)."""
        raw = min(self.cap_s, self.base_s * 2.0 ** (attempt - 1))
        return raw * (0.5 + self.rng.random() / 2)


def with_retries(
    call: Callable[[], T],
    policy: RetryPolicy,
    classify_error: Callable[[BaseException], ModelCallError],
    on_retry: Callable[[int, ModelCallError, float], None] | None = None,
) -> tuple[T, list[dict[str, Any]]]:
    """Run `call`, retrying transient failures; returns the result and the failed attempts.

    Raises:
        ModelCallError: a permanent error, or the last transient one once retries are spent.
    """
    failures: list[dict[str, Any]] = []
    started = policy.clock()
    attempt = 0
    while True:
        try:
            return call(), failures
        except Exception as exc:  # noqa: BLE001 - classified below, re-raised as ModelCallError
            error = classify_error(exc)
            error.cause = error.cause or _class_of(exc)
            attempt += 1
            error.attempts = attempt
            failures.append({"attempt": attempt, "kind": error.kind, "error": error.message})
            if not error.transient or attempt > policy.retries:
                raise error from exc
            wait = policy.delay(attempt)
            if policy.clock() - started + wait > policy.budget_s:
                raise error from exc
            if on_retry:
                on_retry(attempt, error, wait)
            policy.sleep(wait)


_JSON_KINDS = {
    type(None): "null",
    list: "array",
    str: "string",
    int: "number",
    float: "number",
    bool: "boolean",
}


def read_error_body(response: httpx.Response) -> None:
    """Turn an error answer whose body is JSON but not an object into a clean ResponseError.

    The `ollama` client reads an error body with `json.loads(body).get("error")`, so a
    proxy's or a broken server's `[]` or `"text"` on an HTTP 500 crashed it with
    AttributeError, which no retry catches. Raised here first, it is a 5xx like any other
    (retried) or a 4xx (one clear line).
    """
    if response.status_code < 400:
        return
    text = response.read().decode("utf-8", "replace").strip()
    try:
        body = json.loads(text)
    except ValueError:
        return  # plain text or HTML: the client keeps it as the error text
    if not isinstance(body, dict):
        raise ollama.ResponseError(
            f"HTTP {response.status_code} with a JSON {_JSON_KINDS.get(type(body), 'value')} "
            f"where an error object belongs: {text[:200]}",
            response.status_code,
        )


_clients: dict[tuple[Any, ...], ChatOllama] = {}


def chat_client(
    model: str, host: str, timeout_s: float, keep_alive: str, reasoning: bool | str | None
) -> ChatOllama:
    """A ChatOllama for these settings (cached: it owns an HTTP connection pool)."""
    key = (model, host, timeout_s, keep_alive, reasoning)
    client = _clients.get(key)
    if client is None:
        client = ChatOllama(
            model=model,
            base_url=host,
            keep_alive=keep_alive,
            reasoning=reasoning,
            # httpx loads the CA bundle for every client unless told not to verify; a
            # plain-http local server has no certificate to verify, and loading it is slow.
            client_kwargs={
                "timeout": timeout_s,
                "verify": not host.startswith("http://"),
                "auth": ollama_auth(),
            },
            # Nodes call the model synchronously (also under Studio's server, in a worker
            # thread); an async client would need an async hook. The hooks hold the call to
            # its deadline (`call_deadline`), whatever the stream does, and check the server's
            # numbers before the client validates the answer (`contreact.ollama.server_numbers`).
            sync_client_kwargs={
                "event_hooks": {
                    "request": [call_deadline.on_request],
                    "response": [call_deadline.on_response, read_error_body, checked_stream],
                }
            },
        )
        _clients[key] = client
    return client
