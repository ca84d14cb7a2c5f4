"""Constrained tool mode end to end: the CLI against the stub, through the real ChatOllama.

With `tools: {mode: constrained}` every model call carries Ollama's `format`: a JSON schema
admitting one call of the run's tools or the final answer, the final answer alone once
the cycle's tools are withdrawn. The model reads the tools as text (no native `tools`),
its bare JSON calls run, its final answer is stored unwrapped, and the record says
`constrained` for every step.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from contreact.config.sections import default_reflection_schema
from contreact.nodes.constrained_format import answer_schema
from contreact.nodes.prompts import constrained_tools_intro
from contreact.stub import StubServer
from contreact.tools.registry import TOOL_SCHEMAS
from support.backends import Backend
from support.cli import cli_in_process
from support.runs import outcome, read_log, write_config
from support.stub import scripted_stub

CALLS_OR_FINAL = answer_schema(TOOL_SCHEMAS, None, tools=True)
FINAL_ONLY = answer_schema(TOOL_SCHEMAS, None, tools=False)


def invocations(backend: Backend) -> list[dict[str, Any]]:
    return [e["payload"] for e in read_log(backend, "run-1") if e["event_type"] == "LLM_INVOCATION"]


def test_every_call_is_held_to_one_call_or_the_final_answer(
    tmp_path: Path, sqlite_backend: Backend
) -> None:
    # The simulated agent: write, list, pattern_search, its note; then write, list, read,
    # a message to the operator, its note.
    with StubServer().start() as server:
        config = write_config(
            tmp_path / "c.yaml", sqlite_backend, cycles=2, tools={"mode": "constrained"}
        )
        done = cli_in_process(sqlite_backend, "run", str(config), "--host", server.url)
        chats = [r["body"] for r in server.requests()]
    assert done.returncode == 0, done.stderr + done.stdout

    # Every request: the format, no native tools, the tools as text after the prompt.
    assert len(chats) == 9
    assert all(not body.get("tools") for body in chats)
    assert [body["format"] for body in chats] == [CALLS_OR_FINAL] * 9
    system = chats[0]["messages"][0]["content"]
    assert constrained_tools_intro(False) in system and "- pattern_search(" in system
    assert "<tool_call>" not in system, "the grammar admits no tags"

    # The model's bare JSON calls ran; its notes are stored as text, not as JSON.
    cycles, memory, _ = outcome(sqlite_backend, "run-1")
    assert sorted(memory) == ["topic-1", "topic-2"]
    assert [c[0] for c in cycles] == [1, 2]
    assert all(note and not note.startswith("{") for _, note, _ in cycles)
    assert all(not flags for _, _, flags in cycles)
    answers = [body["messages"][-2]["content"] for body in chats[1:4]]
    assert answers[0].startswith('{"name": "write", "arguments": {"key": "topic-1"')

    # The record says which mode each step used.
    calls = invocations(sqlite_backend)
    assert len(calls) == 9
    assert all(c["options"]["tool_mode"] == "constrained" for c in calls)
    assert all(c["options"]["tools_offered"] for c in calls)
    start = next(e for e in read_log(sqlite_backend, "run-1") if e["event_type"] == "RUN_START")
    assert start["payload"]["tools"]["mode"] == "constrained"


def test_withdrawn_tools_leave_only_the_final_answer_in_the_format(
    tmp_path: Path, sqlite_backend: Backend
) -> None:
    # One tool call per cycle: the second request admits only the structured reflection.
    script = {
        1: [
            {"tool_calls": [{"name": "write", "arguments": {"key": "a", "value": "1"}}]},
            {"tool_calls": [{"name": "read", "arguments": {"key": "a"}}]},
        ]
    }
    with scripted_stub(script) as server:
        config = write_config(
            tmp_path / "c.yaml",
            sqlite_backend,
            cycles=1,
            tools={"mode": "constrained"},
            reflection={"format": "json"},
            limits={"max_tool_calls_per_cycle": 1},
        )
        done = cli_in_process(sqlite_backend, "run", str(config), "--host", server.url)
        chats = [r["body"] for r in server.requests()]
    assert done.returncode == 0, done.stderr + done.stdout

    schema = default_reflection_schema()
    assert [body["format"] for body in chats] == [
        answer_schema(TOOL_SCHEMAS, schema, tools=True),
        answer_schema(TOOL_SCHEMAS, schema, tools=False),
    ]
    assert chats[1]["format"]["required"] == ["reflection", "plan"]
    cycles, memory, _ = outcome(sqlite_backend, "run-1")
    assert memory == {"a": "1"}
    # The stub, held to the reflection, could not call `read`: it closed the cycle.
    ((_, note, flags),) = cycles
    assert note.startswith('{"reflection": "Tools withdrawn; closing cycle 1."')
    assert "reflection_invalid" not in flags
    calls = invocations(sqlite_backend)
    assert [c["options"]["tools_offered"] for c in calls] == [True, False]
    assert {c["options"]["tool_mode"] for c in calls} == {"constrained"}
