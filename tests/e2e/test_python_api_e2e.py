"""`contreact.run(config, tools=[...], hooks=[...])`: tools and hooks as Python objects."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import contreact
from contreact.engine.runner import resume_run
from contreact.tools.custom import ExtensionError
from support.backends import Backend
from support.runs import read_log
from support.stub import scripted_stub


def test_import_contreact_loads_no_engine() -> None:
    code = "import sys, contreact; contreact.tool; print('langgraph' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.strip() == "False", done.stderr


def test_a_notebook_hands_over_a_tool_and_a_hook(tmp_path: Path, sqlite_backend: Backend) -> None:
    keys: list[str] = []

    @contreact.tool(effect="effectful", name="coin")
    def flip(idempotency_key: str = "") -> str:
        """Flip a coin."""
        keys.append(idempotency_key)
        return "heads"

    class Rewriter:
        def before_tool_call(self, call: dict[str, Any]) -> dict[str, Any] | None:
            if call["name"] == "write":
                return {"args": {**call["args"], "value": call["args"]["value"].upper()}}
            return None

    script = {
        1: [
            {"tool_calls": [{"name": "coin", "arguments": {}}]},
            {"tool_calls": [{"name": "write", "arguments": {"key": "k", "value": "quiet"}}]},
            "Reflection 1.",
        ]
    }
    with scripted_stub(script) as server:
        config = {
            "run_id": "nb",
            "model": "stub-model",
            "cycles": 1,
            "ollama": {"host": server.url},
            "tools": {"disable": ["delete"], "entry_points": False},
            "storage": sqlite_backend.storage_yaml(),
        }
        done = contreact.run(config, tools=[flip], hooks=[Rewriter()])
        sent = server.requests()[0]["body"]
        again = contreact.run(config, tools=[flip], hooks=[Rewriter()])
    assert done.status == "completed" and again.status == "completed"
    # Continued without the tool it was started with, the run refuses in one line.
    with pytest.raises(ExtensionError, match="started with the tools coin, which it lacks now"):
        resume_run("nb", sqlite_backend.storage(), extra_cycles=1)
    assert keys == ["nb:c1:s0:t0"]  # the completed run was not driven again
    offered = [t["function"]["name"] for t in sent["tools"]]
    assert offered == [
        "write",
        "read",
        "list",
        "pattern_search",
        "send_message_to_operator",
        "coin",
    ]
    assert "idempotency_key" not in str(sent["tools"][-1])

    log = read_log(sqlite_backend, "nb")
    [record] = [e["payload"] for e in log if e["event_type"] == "EXTENSIONS"]
    assert [t["name"] for t in record["tools"]] == ["coin"] and record["disabled"] == ["delete"]
    assert record["hooks"][0]["points"] == ["before_tool_call"]
    [rewrite] = [e["payload"] for e in log if e["event_type"] == "HOOK"]
    assert rewrite["action"] == "rewrite" and rewrite["rewritten"] == {"key": "k", "value": "QUIET"}
    [written] = [
        e["payload"]
        for e in log
        if e["event_type"] == "TOOL_CALL" and e["payload"]["tool_name"] == "write"
    ]
    # The model is told its call was changed; the change is what ran.
    assert written["parameters"] == {"key": "k", "value": "QUIET"}
    assert written["output"].startswith("(A hook changed this call's arguments to")
