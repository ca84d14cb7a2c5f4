"""A tool of your own cannot stop or wedge its run (docs/config.md, "Your own tools").

A tool that calls `sys.exit`, raises `KeyboardInterrupt` or another `BaseException` gives
the model an error result and the run goes on, with one line naming the tool; a tool that
never returns is abandoned after `tools.timeout_s`. While a run sits inside a tool,
`status` names the tool and how long it has run, and a real Ctrl-C still stops the run.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from support.backends import Backend
from support.cli import cli, cli_in_process, cli_start
from support.runs import read_log, write_config
from support.stub import scripted_stub

TOOLS = '''
import sys
import time
from pathlib import Path

HERE = Path(__file__).parent


class Stop(BaseException):
    """Not an Exception: what a library might raise to unwind everything."""


def quit_now() -> str:
    """End the program."""
    sys.exit(5)


def interrupt_me() -> str:
    """Raise KeyboardInterrupt, as if Ctrl-C had been pressed."""
    raise KeyboardInterrupt


def stop_hard() -> str:
    """Raise a BaseException of its own."""
    raise Stop("going down")


def slow_tool(seconds: float) -> str:
    """Take its time.

    Args:
        seconds: How long to take.
    """
    time.sleep(seconds)
    (HERE / "slow_tool.finished").write_text("finished")
    return "done"


def wait_for_release() -> str:
    """Wait until the test releases it (a file appears), at most two minutes."""
    (HERE / "waiting").write_text("waiting")
    deadline = time.monotonic() + 120
    while not (HERE / "release").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return "released"
'''

TOOL_NAMES = ["quit_now", "interrupt_me", "stop_hard", "slow_tool", "wait_for_release"]


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def configured(tmp_path: Path, backend: Backend, url: str, **fields: Any) -> Path:
    """A run config beside the tools' module (found there: the config's own folder)."""
    (tmp_path / "my_tools.py").write_text(TOOLS)
    tools = {"add": [f"my_tools:{n}" for n in TOOL_NAMES], "entry_points": False}
    tools.update(fields.pop("tools", {}))
    return write_config(
        tmp_path / "c.yaml", backend, cycles=2, ollama={"host": url}, tools=tools, **fields
    )


def tool_calls(backend: Backend, name: str) -> list[dict[str, Any]]:
    """The TOOL_CALL payloads of the tool `name`."""
    calls = [e["payload"] for e in read_log(backend, "run-1") if e["event_type"] == "TOOL_CALL"]
    return [c for c in calls if c["tool_name"] == name]


def status_of(backend: Backend) -> dict[str, Any]:
    shown = cli_in_process(backend, "status", "run-1", "--json")
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout)  # type: ignore[no-any-return]


def assert_contained(backend: Backend, done: Any, tool: str, raised: str) -> None:
    """The run completed; the model was told; one line named the tool; no traceback."""
    assert done.returncode == 0, done.stderr + done.stdout
    assert "Traceback" not in done.stderr + done.stdout
    [result] = tool_calls(backend, tool)
    assert result["error"] is True
    assert f"the tool {tool} raised {raised}" in result["output"]
    said = [line.strip() for line in done.stdout.splitlines() if f"tool `{tool}`" in line]
    assert said == [
        f"cycle 1 · step 1 · tool `{tool}` raised {raised}; the model was told and the run goes on"
    ]
    assert status_of(backend)["status"] == "completed"
    # The run went on: both cycles closed, the second after the model heard of the failure.
    cycles = [e for e in read_log(backend, "run-1") if e["event_type"] == "CYCLE_END"]
    assert len(cycles) == 2


def test_a_tool_calling_sys_exit_is_an_error_result_and_the_run_completes(
    tmp_path: Path, backend: Backend
) -> None:
    script: dict[int, list[Any]] = {1: [call("quit_now"), "Reflection 1."], 2: ["Reflection 2."]}
    with scripted_stub(script) as server:
        config = configured(tmp_path, backend, server.url)
        done = cli(backend, "run", str(config))
    assert_contained(backend, done, "quit_now", "SystemExit(5)")


@pytest.mark.parametrize(
    ("tool", "raised"),
    [("interrupt_me", "KeyboardInterrupt"), ("stop_hard", "Stop(going down)")],
)
def test_a_tool_raising_keyboard_interrupt_or_its_own_base_exception_is_an_error_result(
    tmp_path: Path, sqlite_backend: Backend, tool: str, raised: str
) -> None:
    script: dict[int, list[Any]] = {1: [call(tool), "Reflection 1."], 2: ["Reflection 2."]}
    with scripted_stub(script) as server:
        config = configured(tmp_path, sqlite_backend, server.url)
        done = cli(sqlite_backend, "run", str(config))
    assert_contained(sqlite_backend, done, tool, raised)


def test_a_tool_past_tools_timeout_s_is_abandoned_and_the_run_completes(
    tmp_path: Path, backend: Backend
) -> None:
    script: dict[int, list[Any]] = {
        1: [call("slow_tool", seconds=300), "Reflection 1."],
        2: ["Reflection 2."],
    }
    with scripted_stub(script) as server:
        config = configured(tmp_path, backend, server.url, tools={"timeout_s": 1})
        started = time.monotonic()
        done = cli(backend, "run", str(config))
        took = time.monotonic() - started
    assert done.returncode == 0, done.stderr + done.stdout
    # Far less than the 300 s the tool would have taken (no figure: a loaded machine is slow).
    assert took < 120
    [result] = tool_calls(backend, "slow_tool")
    assert result["error"] is True
    assert "the tool slow_tool did not return within 1 s (tools.timeout_s)" in result["output"]
    said = [line.strip() for line in done.stdout.splitlines() if "tool `slow_tool`" in line]
    assert said == [
        "cycle 1 · step 1 · tool `slow_tool` did not return within 1 s (tools.timeout_s) and "
        "was abandoned; the model was told and the run goes on"
    ]
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "slow_tool.finished").exists()
    assert status_of(backend)["status"] == "completed"


def test_status_names_the_tool_a_run_is_in_and_sigint_there_still_stops_the_run(
    tmp_path: Path, sqlite_backend: Backend
) -> None:
    script: dict[int, list[Any]] = {
        1: [call("wait_for_release"), "Reflection 1."],
        2: ["Reflection 2."],
    }
    with scripted_stub(script) as server:
        config = configured(tmp_path, sqlite_backend, server.url)
        proc = cli_start(sqlite_backend, "run", str(config))
        try:
            deadline = time.monotonic() + 60
            shown: dict[str, Any] = {}
            while not shown.get("activity"):
                assert proc.poll() is None, proc.communicate()
                assert time.monotonic() < deadline, f"status never named the tool: {shown}"
                if (tmp_path / "waiting").exists():
                    shown = status_of(sqlite_backend)
                time.sleep(0.05)
            assert shown["status"] == "running"
            assert shown["activity"].startswith("in tool `wait_for_release` for ")
            assert shown["activity"].endswith(" s")
            # The time it has spent there grows as it waits.
            seconds = int(shown["activity"].split(" for ")[1].removesuffix(" s"))
            while int(status_of(sqlite_backend)["activity"].split(" for ")[1][:-2]) <= seconds:
                assert time.monotonic() < deadline
                time.sleep(0.1)
            plain = cli_in_process(sqlite_backend, "status", "run-1")
            assert "activity: in tool `wait_for_release` for " in plain.stdout

            # Ctrl-C reaches the run, not the tool: the run stops, interrupted, as before.
            os.kill(proc.pid, signal.SIGINT)
            _, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 130, err
        assert "Traceback" not in err
        stopped = status_of(sqlite_backend)
        assert stopped["status"] == "interrupted" and stopped["activity"] is None
        assert not tool_calls(sqlite_backend, "wait_for_release")

        (tmp_path / "release").write_text("go")
        resumed = cli_in_process(sqlite_backend, "resume", "run-1")
    assert resumed.returncode == 0, resumed.stderr
    [result] = tool_calls(sqlite_backend, "wait_for_release")
    assert result == {**result, "error": False, "output": "released"}
    final = status_of(sqlite_backend)
    assert final["status"] == "completed" and final["activity"] is None
