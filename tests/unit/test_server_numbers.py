"""Numbers from the server: checked where they enter, safe wherever they are read.

A count or a duration is a non-negative int or float, finite, at most 2**53, and not a
bool; anything else is absent and named. The property tests put any JSON value in any
field of a chat answer, serve it over loopback HTTP to the real client (ChatOllama and
the `ollama` client, with contreact's response hooks) and require that the call either
gives a record whose numbers are numbers, which every consumer then reads without
error, or fails in a way that is retried (the run goes on). Recorded values are read
through the same check, so a journal holding any JSON value in a number field is safe.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Iterator
from dataclasses import asdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from io import StringIO
from itertools import cycle
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from langchain_core.messages import HumanMessage

from contreact.analysis.metrics import CYCLE_METRICS, summarize_cycles
from contreact.checkpoints.cycles import CycleRecord
from contreact.checkpoints.event_schema import LlmInvocation
from contreact.cli.progress import LineProgress
from contreact.graph.state import Context, new_stats
from contreact.nodes.invoke import ai_message, call_model, stats_after
from contreact.nodes.storable import storable
from contreact.ollama.client import ModelCallError
from contreact.ollama.server_numbers import (
    MAX_SERVER_NUMBER,
    SERVER_NUMBER_FIELDS,
    checked_line,
    number,
    whole_number,
)
from contreact.studies.status import tokens_per_s

HUGE = 10**400

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**450), max_value=10**450)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=12,
)
"""Any JSON value, Python's JSON included (NaN, Infinity, integers of any length)."""


# --------------------------------------------------------------------------- the rule


@pytest.mark.parametrize(
    "value", [0, 1, 7, 2**53, 0.0, 1.5, 123456.789], ids=lambda v: repr(v)[:12]
)
def test_a_non_negative_finite_number_up_to_2_53_is_kept(value: float) -> None:
    assert number(value) == value


@pytest.mark.parametrize(
    "value",
    [
        HUGE,
        2**53 + 1,
        -1,
        -0.5,
        math.nan,
        math.inf,
        -math.inf,
        1e300,
        True,
        False,
        "12",
        "",
        None,
        [],
        {},
        [5],
        {"n": 5},
    ],  # fmt: skip
    ids=lambda v: repr(v)[:12],
)
def test_anything_else_is_absent(value: Any) -> None:
    assert number(value) is None


def test_in_an_answer_a_count_or_duration_is_also_whole() -> None:
    assert whole_number(5.0) == 5 and whole_number(7) == 7
    assert whole_number(0.5) is None and whole_number(-1) is None


@given(JSON)
def test_a_kept_number_is_safe_for_float_arithmetic(value: Any) -> None:
    kept = number(value)
    if kept is not None:
        assert 0 <= float(kept) <= MAX_SERVER_NUMBER and not isinstance(kept, bool)
        assert math.isfinite(kept / 1e-9)


@given(field=st.sampled_from(SERVER_NUMBER_FIELDS), value=JSON)
def test_a_line_keeps_good_numbers_and_nulls_and_names_bad_ones(field: str, value: Any) -> None:
    line = json.dumps({"done": True, "eval_count": 3, field: value}).encode()
    out, dropped = checked_line(line)
    if whole_number(value) is not None or value is None:
        assert (out, dropped) == (line, [])
    else:
        assert dropped == [field]
        assert json.loads(out) == {"done": True, "eval_count": 3, field: None}


def test_a_line_that_is_not_a_json_object_passes_unchanged() -> None:
    for line in (b"<html>eval_count</html>", b'["eval_count", -1]', b"[" * 5000 + b'"eval_count"'):
        assert checked_line(line) == (line, [])


# --------------------------------------------------------------------------- the consumers


@example(tokens_in=2**53, tokens_out=2**53, seconds=2**53)
@given(tokens_in=JSON, tokens_out=JSON, seconds=JSON)
def test_any_recorded_value_is_counted_shown_and_tabled_without_error(
    tokens_in: Any, tokens_out: Any, seconds: Any
) -> None:
    """A journal or log written before the check may hold anything in a number field."""
    values = (tokens_in, tokens_out, seconds)
    record = {"content": "x", "tokens_in": tokens_in, "tokens_out": tokens_out, "seconds": seconds}
    stats = stats_after(stats_after(new_stats(), record), record)
    for name in ("tokens_in", "tokens_out", "model_seconds"):
        assert number(stats[name]) is not None, (name, stats[name])

    progress = LineProgress(StringIO())
    shown = {**stats, "tokens_out": tokens_out, "model_seconds": seconds}
    progress.update("invoke", {"stats": shown})
    assert math.isfinite(progress.rate)

    rate = tokens_per_s({"tokens_out": tokens_out, "duration_s": seconds})
    assert rate is None or math.isfinite(rate)

    # Table 1 sums stored cycle metrics; any of them may hold what a server sent.
    metrics = {name: value for name, value in zip(CYCLE_METRICS, cycle(values), strict=False)}
    records = [CycleRecord(cycle=1, reflection="r", metrics=metrics)] * 2
    table = summarize_cycles(records)
    assert all(math.isfinite(v) for v in table.values())
    json.dumps(table, allow_nan=False)


# --------------------------------------------------------------------------- over HTTP


class _OneAnswer(BaseHTTPRequestHandler):
    """Answers every chat request with the lines the test set, as Ollama streams them."""

    protocol_version = "HTTP/1.1"
    lines: list[bytes] = []

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = b"".join(line + b"\n" for line in type(self).lines)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _OneAnswer)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def _answer() -> list[dict[str, Any]]:
    """A well-formed two-chunk answer, as Ollama streams it."""
    return [
        {
            "model": "m",
            "created_at": "2026-01-01T00:00:00Z",
            "message": {"role": "assistant", "content": "Reflection: "},
            "done": False,
        },
        {
            "model": "m",
            "created_at": "2026-01-01T00:00:00Z",
            "message": {"role": "assistant", "content": "fine."},
            "done": True,
            "done_reason": "stop",
            "total_duration": 10,
            "load_duration": 1,
            "prompt_eval_count": 5,
            "prompt_eval_duration": 2,
            "eval_count": 3,
            "eval_duration": 4,
        },
    ]


HTTP_SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
CHUNK_FIELDS = ("model", "created_at", "done", "done_reason", "message", *SERVER_NUMBER_FIELDS)
MESSAGE_FIELDS = ("role", "content", "thinking", "tool_calls", "images", "tool_name")


def _served_call(url: str, lines: list[bytes]) -> dict[str, Any] | ModelCallError:
    _OneAnswer.lines = lines
    ctx = Context(model="m", ollama={"host": url, "timeout_s": 10, "retries": 0})
    try:
        return call_model(ctx, [HumanMessage("Cycle 1 begins.")], False)
    except ModelCallError as error:
        return error


def _completable(result: dict[str, Any] | ModelCallError) -> None:
    """A record every reader can take, or a failure the run retries."""
    if isinstance(result, ModelCallError):
        assert result.transient, result.message
        return
    for name in ("tokens_in", "tokens_out"):
        assert result[name] is None or number(result[name]) is not None, result[name]
    record, _ = storable(result)
    payload = LlmInvocation(
        tokens_in=record["tokens_in"],
        tokens_out=record["tokens_out"],
        duration_s=record["seconds"],
        dropped_fields=record["dropped_fields"],
        response={"content": record["content"], "tool_calls": record["tool_calls"]},
    )
    json.dumps(asdict(payload), ensure_ascii=False, allow_nan=False)
    assert tokens_per_s(asdict(payload)) is None or math.isfinite(tokens_per_s(asdict(payload)))
    ai_message(record, 1, 0)
    stats = stats_after(new_stats(), record)
    LineProgress(StringIO()).update("invoke", {"stats": stats})


@HTTP_SETTINGS
@given(chunk=st.sampled_from([0, 1]), field=st.sampled_from(CHUNK_FIELDS), value=JSON)
def test_any_json_value_in_any_field_of_a_chunk_leaves_the_run_completable(
    server: str, chunk: int, field: str, value: Any
) -> None:
    answer = _answer()
    answer[chunk][field] = value
    result = _served_call(server, [json.dumps(part).encode() for part in answer])
    _completable(result)
    if field in SERVER_NUMBER_FIELDS and chunk == 1 and value is not None:
        assert isinstance(result, dict), result
        kept = whole_number(value) is not None
        assert (field in result["dropped_fields"]) is not kept


@HTTP_SETTINGS
@given(chunk=st.sampled_from([0, 1]), field=st.sampled_from(MESSAGE_FIELDS), value=JSON)
def test_any_json_value_in_any_field_of_a_message_leaves_the_run_completable(
    server: str, chunk: int, field: str, value: Any
) -> None:
    answer = _answer()
    answer[chunk]["message"][field] = value
    _completable(_served_call(server, [json.dumps(part).encode() for part in answer]))


def test_a_401_digit_eval_count_over_http_is_absent_and_named(server: str) -> None:
    answer = _answer()
    answer[1]["eval_count"] = HUGE
    result = _served_call(server, [json.dumps(part).encode() for part in answer])
    assert isinstance(result, dict)
    assert result["tokens_out"] is None and result["tokens_in"] == 5
    assert result["dropped_fields"] == ["eval_count"]
