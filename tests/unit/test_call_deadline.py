"""`ollama.timeout_s` bounds the whole model call, over real HTTP to the stub.

httpx's own timeout bounds each read, so a stream that trickles a chunk every 0.2 s never
trips a 1-second timeout. The deadline does: the first byte, the gaps between chunks and
the total all fit in it, and an abandoned call leaves no timer or half-read stream behind.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest
from langchain_core.messages import HumanMessage

from contreact.ollama.client import ModelCallError, chat_client, within_deadline
from contreact.ollama.deadline import Deadline, _watchdog
from contreact.stub import StubServer

PROMPT = [HumanMessage("Cycle 1 begins.")]


@pytest.fixture
def server() -> Iterator[StubServer]:
    with StubServer().start() as stub:
        yield stub


def call(server: StubServer, seconds: float) -> tuple[str, float]:
    """One call with a `seconds` deadline (httpx's own timeout is the same); answer, time."""
    client = chat_client("stub-model", server.url, seconds, "5m", None)
    started = time.monotonic()
    reply = within_deadline(
        lambda: client.invoke(PROMPT), seconds, model="stub-model", host=server.url
    )
    return str(reply.content), time.monotonic() - started


def timed_out(server: StubServer, seconds: float) -> tuple[ModelCallError, float]:
    started = time.monotonic()
    with pytest.raises(ModelCallError) as caught:
        call(server, seconds)
    return caught.value, time.monotonic() - started


def test_a_stream_that_drips_past_the_deadline_is_abandoned_at_the_deadline(
    server: StubServer,
) -> None:
    call(server, 1.0)  # the drip then comes on a kept-alive connection
    # Every gap (0.2 s) is well inside the 1 s timeout; the whole answer (4 s) is not.
    server.add_faults({"kind": "drip", "seconds": 0.2, "chunks": 20})
    error, elapsed = timed_out(server, 1.0)
    assert error.kind == "timeout" and error.transient
    assert 0.9 <= elapsed < 1.6, elapsed
    assert "within 1 s" in error.message and server.url in error.message
    assert "stub-model" in error.message and "timeout_s" in error.message


def test_a_server_silent_before_its_first_byte_is_abandoned_at_the_deadline(
    server: StubServer,
) -> None:
    server.add_faults({"kind": "delay", "seconds": 5})
    error, elapsed = timed_out(server, 1.0)
    assert error.kind == "timeout"
    assert 0.9 <= elapsed < 1.6, elapsed


def test_the_deadline_counts_from_the_start_of_the_call_not_of_the_stream() -> None:
    # 0.6 s before the first byte, then gaps of 0.2 s: no single wait is near 1 s.
    with StubServer(latency_ms=600).start() as slow:
        slow.add_faults({"kind": "drip", "seconds": 0.2, "chunks": 10})
        error, elapsed = timed_out(slow, 1.0)
    assert error.kind == "timeout" and 0.9 <= elapsed < 1.6, elapsed


def test_a_deadline_that_ended_in_time_shuts_nothing() -> None:
    a, b = socket.socketpair()

    class Stream:
        def get_extra_info(self, name: str) -> object:
            return a if name == "socket" else None

    try:
        deadline = Deadline(0.05)
        deadline.watch(Stream())
        deadline.finish()  # the call ended: its connection went back to the pool
        time.sleep(0.2)
        b.setblocking(False)
        with pytest.raises(BlockingIOError):
            b.recv(1)  # still open: nothing to read, no shutdown
    finally:
        a.close()
        b.close()


def test_many_calls_leave_no_armed_deadline_behind() -> None:
    from contreact.ollama.deadline import call_deadline

    for _ in range(500):
        with call_deadline(60):
            pass
    assert _watchdog.pending() == 0 and len(_watchdog._heap) < 300


def test_a_call_within_the_deadline_is_untouched(server: StubServer) -> None:
    server.add_faults({"kind": "drip", "seconds": 0.05, "chunks": 4})
    content, elapsed = call(server, 2.0)
    assert content.startswith("....") and elapsed < 2.0


def test_an_abandoned_call_leaves_nothing_running_and_the_next_call_works(
    server: StubServer,
) -> None:
    server.add_faults({"kind": "drip", "seconds": 0.2, "chunks": 50})
    timed_out(server, 0.6)
    assert _watchdog.pending() == 0  # no deadline of a call that ended is left armed
    content, elapsed = call(server, 0.6)
    assert content and not content.startswith(".") and elapsed < 0.6
    # The abandoned stream's connection was shut: the stub's drip met a closed socket.
    assert [r["fault"] for r in server.requests()] == ["drip", None]


def test_a_deadline_passed_before_the_connection_exists_shuts_it_at_once() -> None:
    deadline = Deadline(0.05)
    for _ in range(200):  # the watchdog thread expires it (slower on a loaded machine)
        if deadline.expired:
            break
        time.sleep(0.01)
    a, b = socket.socketpair()

    class Stream:
        def get_extra_info(self, name: str) -> object:
            return a if name == "socket" else None

    try:
        deadline.watch(Stream())
        assert deadline.expired and b.recv(1) == b""  # the peer sees the shutdown
    finally:
        deadline.finish()
        a.close()
        b.close()
