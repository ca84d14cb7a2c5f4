r"""Numbers from the model server, checked where they enter: a count or a duration, or absent.

Ollama ends every answer with counts and durations (`prompt_eval_count`, `eval_count`,
`total_duration`, ...). A server may send anything there: a 401-digit integer (a float
division by it raised OverflowError in the progress line, and the answer, journaled, did
so again on every resume), a negative count, NaN, a string. The `ollama` client's own
validation refused some of these (the whole answer was retried, and a server that always
sent one failed every run) and let others through (negative and huge integers).

So there is one rule, applied in one place: a server number is a non-negative `int` or
`float`, finite, at most `MAX_SERVER_NUMBER` (`bool` is not a number), and as it arrives
in an answer also whole (Ollama's are integers). Anything else is absent (None) and its
field is named in the `LLM_INVOCATION`'s `dropped_fields`. The rule is applied to the raw
answer before the client validates it (`checked_stream`), to what the client hands on
(`checked_fields`), and again by every consumer of a recorded value (`number`), because
journals written before the rule may hold bad values. A key the server spells with JSON
escapes (`"eval\u005fcount"`) passes the raw check unseen: what the client accepts of it
is checked again by `checked_fields`, what it refuses fails the answer, which is retried.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from functools import cache
from typing import Any

__all__ = [
    "MAX_SERVER_NUMBER",
    "SERVER_NUMBER_FIELDS",
    "added",
    "checked_fields",
    "checked_line",
    "checked_stream",
    "dropped_on_this_call",
    "number",
    "number_or_zero",
    "whole_number",
]

MAX_SERVER_NUMBER = 2**53
"""The largest server number kept: every integer up to it is exact as a float, so sums,
rates and means of kept values neither overflow nor lose digits (2**53 nanoseconds is
104 days; 2**53 tokens is beyond any model)."""

SERVER_NUMBER_FIELDS: tuple[str, ...] = (
    "prompt_eval_count",
    "eval_count",
    "total_duration",
    "load_duration",
    "prompt_eval_duration",
    "eval_duration",
)
"""The counts and durations of an Ollama chat answer (durations in nanoseconds)."""

_FIELD_BYTES = tuple(f'"{name}"'.encode() for name in SERVER_NUMBER_FIELDS)


def number(value: Any) -> int | float | None:
    """`value` if it is a server number by the rule above, else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    # An int is compared as an int: float(10**400) itself raises OverflowError.
    return value if 0 <= value <= MAX_SERVER_NUMBER else None


def whole_number(value: Any) -> int | float | None:
    """`number(value)` if it is also whole: a count or a duration as Ollama sends them.

    Ollama's counts and durations (nanoseconds) are integers, and the client refuses a
    fractional one by failing the whole answer; `5.0` is whole and kept.
    """
    checked = number(value)
    return None if isinstance(checked, float) and not checked.is_integer() else checked


def number_or_zero(value: Any) -> int | float:
    """`number(value)`, with absent as 0: for sums and rates of recorded values."""
    checked = number(value)
    return 0 if checked is None else checked


def added(total: Any, value: Any) -> int | float:
    """`total + value` of server numbers, absent as 0, saturating at `MAX_SERVER_NUMBER`.

    A cycle's counters sum its calls' counts; many calls at the bound would otherwise
    pass it (and a 64-bit checkpoint field after 1,024 of them).
    """
    return min(MAX_SERVER_NUMBER, number_or_zero(total) + number_or_zero(value))


def checked_fields(
    answer: Mapping[str, Any], fields: tuple[str, ...] = SERVER_NUMBER_FIELDS
) -> tuple[dict[str, int | float | None], list[str]]:
    """The `fields` of `answer` (whole numbers), checked; and those present but refused."""
    values: dict[str, int | float | None] = {}
    dropped = []
    for name in fields:
        raw = answer.get(name)
        values[name] = whole_number(raw)
        if raw is not None and values[name] is None:
            dropped.append(name)
    return values, dropped


_dropped: ContextVar[list[str] | None] = ContextVar("contreact_dropped_fields", default=None)


@contextmanager
def dropped_on_this_call() -> Iterator[list[str]]:
    """Collects the fields `checked_stream` refused during one model call.

    The client validates the answer after the stream is read and keeps no unknown key,
    so what was refused travels beside it: `with dropped_on_this_call() as dropped:`.
    """
    fields: list[str] = []
    token = _dropped.set(fields)
    try:
        yield fields
    finally:
        _dropped.reset(token)


def checked_line(line: bytes) -> tuple[bytes, list[str]]:
    """One NDJSON line of an answer with every refused server number made `null`.

    A line that names none of the fields, or is not a JSON object, is returned as it is
    (the client then judges it); so is one whose numbers are all fine.
    """
    if not any(name in line for name in _FIELD_BYTES):
        return line, []
    try:
        part = json.loads(line)
    except (ValueError, RecursionError):
        return line, []
    if not isinstance(part, dict):
        return line, []
    _, dropped = checked_fields(part)
    if not dropped:
        return line, []
    for name in dropped:
        part[name] = None
    return json.dumps(part).encode(), dropped


class _CheckedLines:
    """The NDJSON lines of a byte stream, each passed through `checked_line`."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __iter__(self) -> Iterator[bytes]:
        # A line may arrive in many chunks (a huge answer line): kept as parts, joined once.
        pending: list[bytes] = []
        for chunk in self.inner:
            if b"\n" not in chunk:
                pending.append(chunk)
                continue
            *lines, rest = b"".join([*pending, chunk]).split(b"\n")
            pending = [rest] if rest else []
            yield b"".join(_checked(line) + b"\n" for line in lines)
        if pending:
            yield _checked(b"".join(pending))

    def close(self) -> None:
        self.inner.close()


def _checked(line: bytes) -> bytes:
    out, dropped = checked_line(line)
    collected = _dropped.get()
    if collected is not None:
        collected.extend(name for name in dropped if name not in collected)
    return out


@cache
def _sync_stream_class() -> type:
    # httpx is imported here, not above: the module is also read by commands that never
    # talk to a server (`report`, batch status), and httpx costs them start-up time.
    import httpx

    return type("CheckedStream", (_CheckedLines, httpx.SyncByteStream), {})


def checked_stream(response: Any) -> None:
    """An httpx response hook: the answer's server numbers are checked as its lines arrive."""
    response.stream = _sync_stream_class()(response.stream)
