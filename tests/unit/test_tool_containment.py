"""A tool of your own runs contained: it can neither stop nor wedge the run that calls it."""

from __future__ import annotations

import contextvars
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from contreact.checkpoints.activity import in_tool, tool_of
from contreact.tools.containment import Abandoned, Escaped, Returned, contained, raised
from contreact.tools.custom import custom_tool
from contreact.tools.memory import ToolSession
from contreact.tools.registry import Contained, Toolset


class Stop(BaseException):
    """A BaseException of a tool's own."""


def test_a_call_that_returns_gives_its_value() -> None:
    assert contained(lambda: "fine", timeout_s=5) == Returned("fine")


def test_an_exception_is_raised_again_as_it_was() -> None:
    error = ValueError("bad input")

    def fails() -> str:
        raise error

    with pytest.raises(ValueError) as caught:
        contained(fails, timeout_s=5)
    assert caught.value is error


@pytest.mark.parametrize(
    ("escape", "said"),
    [
        (lambda: sys.exit(5), "SystemExit(5)"),
        (lambda: sys.exit(), "SystemExit"),
        (KeyboardInterrupt, "KeyboardInterrupt"),
        (lambda: Stop("going down\nand more"), "Stop(going down)"),
        (GeneratorExit, "GeneratorExit"),
    ],
    ids=["sys.exit(5)", "sys.exit()", "KeyboardInterrupt", "own", "GeneratorExit"],
)
def test_what_raises_past_exception_is_escaped_never_a_stop(escape: object, said: str) -> None:
    def tool() -> str:
        made = escape()  # type: ignore[operator]
        raise made

    ended = contained(tool, timeout_s=5)
    assert isinstance(ended, Escaped)
    assert ended.said == said


def test_a_long_message_is_cut() -> None:
    assert raised(Stop("x" * 500)) == "Stop(" + "x" * 119 + "…)"


def test_a_call_past_its_timeout_is_abandoned_and_its_thread_left_to_finish() -> None:
    release, finished = threading.Event(), threading.Event()

    def slow() -> str:
        release.wait(60)
        finished.set()
        return "late"

    started = time.monotonic()
    ended = contained(slow, timeout_s=0.2, name="slow")
    assert ended == Abandoned(0.2)
    assert time.monotonic() - started < 30
    [left] = [t for t in threading.enumerate() if t.name == "contreact-slow"]
    assert left.daemon and left.is_alive() and not finished.is_set()
    release.set()  # it finishes on its own; what it returns goes nowhere
    left.join(30)
    assert finished.is_set()


def test_no_timeout_waits_as_long_as_the_call_takes() -> None:
    def sleeps() -> str:
        time.sleep(0.3)
        return "slept"

    assert contained(sleeps, timeout_s=None) == Returned("slept")


WHERE: contextvars.ContextVar[str] = contextvars.ContextVar("where", default="nowhere")


def test_the_call_sees_the_caller_s_context_variables() -> None:
    WHERE.set("in the caller")
    assert contained(WHERE.get, timeout_s=5) == Returned("in the caller")


@pytest.fixture
def ctrl_c() -> Iterator[None]:
    """Python's own Ctrl-C handler, whatever the test runner installed."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="signals")
def test_a_real_ctrl_c_while_a_tool_runs_stops_the_caller(ctrl_c: None) -> None:
    release = threading.Event()

    def tool() -> str:
        # The signal goes to the process; Python runs its handler in the main thread.
        os.kill(os.getpid(), signal.SIGINT)
        release.wait(60)
        return "never seen"

    try:
        with pytest.raises(KeyboardInterrupt):
            contained(tool, timeout_s=60)
    finally:
        release.set()


def quits() -> str:
    """Quit."""
    sys.exit(5)


def never_returns(seconds: float) -> str:
    """Sleep.

    Args:
        seconds: How long.
    """
    time.sleep(seconds)
    return "done"


def test_a_toolset_answers_an_escape_and_a_timeout_with_an_error_result() -> None:
    tools = Toolset.of(
        custom=[custom_tool(quits, "t:quits"), custom_tool(never_returns, "t:never_returns")],
        timeout_s=0.2,
    )
    session = ToolSession(run_id="r", memory=None, key="r:c1:s1:t0")  # type: ignore[arg-type]
    quit_result = tools.run("quits", {}, session)
    assert quit_result.error
    assert quit_result.output.startswith("Error: the tool quits raised SystemExit(5)")
    assert quit_result.contained == Contained("tool_escaped", "raised SystemExit(5)")
    slow = tools.run("never_returns", {"seconds": 5}, session)
    assert slow.error
    said = "did not return within 0.2 s (tools.timeout_s) and was abandoned"
    assert slow.output.startswith(f"Error: the tool never_returns {said}")
    assert slow.contained == Contained("tool_timeout", said)


def asks() -> str:
    """Ask a person (LangGraph's interrupt)."""
    from langgraph.errors import GraphInterrupt

    raise GraphInterrupt(())


def test_langgraph_s_interrupt_from_a_tool_passes_on_as_before() -> None:
    from langgraph.errors import GraphInterrupt

    tools = Toolset.of(custom=[custom_tool(asks, "t:asks")], timeout_s=5)
    session = ToolSession(run_id="r", memory=None, key="r:c1:s1:t0")  # type: ignore[arg-type]
    with pytest.raises(GraphInterrupt):
        tools.run("asks", {}, session)


def test_while_a_tool_runs_its_run_s_heartbeat_names_it(tmp_path: Path) -> None:
    from contreact.checkpoints.engines import engine_for
    from contreact.checkpoints.registry import beat, create_run, get_run
    from contreact.checkpoints.storage import resolve_storage

    engine = engine_for(resolve_storage(str(tmp_path / "runs"), None))
    create_run(engine, "r", model="m", host="h", config={})
    with in_tool("r", "slow_tool"):
        beat(engine, "r")
        inside = get_run(engine, "r")
    assert inside.in_tool == "slow_tool" and inside.in_tool_since is not None
    shown = inside.tool_seconds(now=inside.in_tool_since + 42)
    assert shown == ("slow_tool", 42.0)
    assert tool_of("r") == (None, None)
    beat(engine, "r")
    assert get_run(engine, "r").tool_seconds() is None
