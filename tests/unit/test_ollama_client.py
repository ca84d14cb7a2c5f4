"""Error classes and retries of model calls (pure logic; the HTTP side is covered end to end)."""

from __future__ import annotations

import random

import httpx
import ollama
import pytest

from contreact.ollama.client import ModelCallError, RetryPolicy, classify, with_retries


def kind(exc: BaseException) -> str:
    return classify(exc, model="m:1", host="http://h", timeout_s=5).kind


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (httpx.ConnectError("refused"), "connection"),
        (ConnectionError("refused"), "connection"),
        (httpx.ReadTimeout("slow"), "timeout"),
        (httpx.RemoteProtocolError("closed"), "connection"),
        (ollama.ResponseError("model 'm:1' not found", 404), "model_missing"),
        (ollama.ResponseError("slow down", 429), "rate_limited"),
        (ollama.ResponseError("boom", 500), "server"),
        (ollama.ResponseError("stream broke", -1), "server"),
        (ollama.ResponseError("input length exceeds the context length", 400), "context_too_long"),
        (ollama.ResponseError("bad json", 400), "bad_request"),
        (ollama.ResponseError("no", 401), "auth"),
        (RuntimeError("odd"), "unknown"),
    ],
)
def test_classify(exc: BaseException, expected: str) -> None:
    assert kind(exc) == expected


def test_messages_are_one_line_and_name_model_and_host() -> None:
    error = classify(
        ollama.ResponseError("model not found\nmore", 404),
        model="m:1",
        host="http://h",
        timeout_s=5,
    )
    assert "\n" not in error.message and "m:1" in error.message and "http://h" in error.message


class FakeTime:
    """A clock that only moves when someone sleeps."""

    def __init__(self, waits: list[float]) -> None:
        self.waits = waits

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)

    def now(self) -> float:
        return sum(self.waits)


def policy(waits: list[float], retries: int = 4, budget: float = 60) -> RetryPolicy:
    fake = FakeTime(waits)
    return RetryPolicy(
        retries=retries, budget_s=budget, sleep=fake.sleep, clock=fake.now, rng=random.Random(0)
    )


def test_transient_errors_are_retried_with_growing_backoff() -> None:
    attempts = iter([httpx.ConnectError("x"), ollama.ResponseError("y", 503), "ok"])

    def call() -> str:
        item = next(attempts)
        if isinstance(item, Exception):
            raise item
        return item

    waits: list[float] = []
    result, failures = with_retries(
        call, policy(waits), lambda e: classify(e, model="m", host="h", timeout_s=1)
    )
    assert result == "ok" and [f["kind"] for f in failures] == ["connection", "server"]
    assert 0.5 <= waits[0] <= 1.0 and 1.0 <= waits[1] <= 2.0


def test_permanent_errors_are_not_retried() -> None:
    waits: list[float] = []

    def call() -> str:
        raise ollama.ResponseError("not found", 404)

    with pytest.raises(ModelCallError) as caught:
        with_retries(call, policy(waits), lambda e: classify(e, model="m", host="h", timeout_s=1))
    assert caught.value.kind == "model_missing" and caught.value.attempts == 1 and waits == []


def test_retries_stop_at_the_count_and_the_budget() -> None:
    def call() -> str:
        raise httpx.ConnectError("down")

    waits: list[float] = []
    with pytest.raises(ModelCallError) as caught:
        with_retries(
            call, policy(waits, retries=2), lambda e: classify(e, model="m", host="h", timeout_s=1)
        )
    assert caught.value.attempts == 3 and len(waits) == 2
    waits = []
    with pytest.raises(ModelCallError):
        with_retries(
            call,
            policy(waits, retries=10, budget=3.5),
            lambda e: classify(e, model="m", host="h", timeout_s=1),
        )
    assert sum(waits) <= 3.5
