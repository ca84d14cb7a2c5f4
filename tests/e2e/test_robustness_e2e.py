"""End to end on the stub: tool-call formats, budgets, nudges, a long cycle in a small context."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from contreact.stub import ChatRequest, LooperAgent, Reply, StubServer
from contreact.text.tokens import estimate_tokens
from contreact.tools.registry import TOOLS
from support.backends import Backend
from support.cli import cli_in_process
from support.runs import read_log, write_config
from support.stub import scripted_stub


def native(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def text(content: str) -> dict[str, Any]:
    return {"content": content}


FORMATS = {
    # Native calls; a number where the schema wants a string.
    1: [native("write", key="n", value=42), text("Reflection 1: native.")],
    # A JSON object in the content.
    2: [
        text('{"name": "write", "arguments": {"key": "b", "value": "two"}}'),
        text("Reflection 2: json."),
    ],
    # Thinking, then fenced JSON with a "parameters" key and a boolean for a string.
    3: [
        text(
            "<think>I will store c.</think>```json\n"
            '{"name": "write", "parameters": {"key": "c", "value": true}}\n```'
        ),
        text("<thinking>done</thinking>Reflection 3: fenced."),
    ],
    # Two <tool_call> blocks in one message.
    4: [
        text(
            '<tool_call>{"name": "write", "arguments": {"key": "d", "value": "four"}}</tool_call>\n'
            '<tool_call>{"name": "delete", "arguments": {"key": "n"}}</tool_call>'
        ),
        text("Reflection 4: tagged."),
    ],
    # Both ReAct forms.
    5: [
        text("Thought: look first.\nAction: read: b"),
        text('Action: delete\nAction Input: {"key": "b"}'),
        text("Reflection 5: react."),
    ],
    # A malformed call, an unknown tool, then a good call.
    6: [
        text('<tool_call>{"name": "write", "arguments": {"key": </tool_call>'),
        text('{"name": "fly", "arguments": {"to": "moon"}}'),
        text('{"name": "write", "arguments": {"key": "e", "value": "five"}}'),
        text("Reflection 6: recovered."),
    ],
}


def test_every_format_in_turn(tmp_path: Path, backend: Backend) -> None:
    with scripted_stub(FORMATS) as server:
        config = write_config(
            tmp_path / "c.yaml", backend, run_id="formats", cycles=6, ollama={"host": server.url}
        )
        result = cli_in_process(backend, "run", str(config))
        requests = [r["body"] for r in server.requests()]
    assert result.returncode == 0, result.stderr
    memory = json.loads(cli_in_process(backend, "memory", "formats", "--json").stdout)
    assert memory == {"c": "true", "d": "four", "e": "five"}

    log = read_log(backend, "formats")
    ends = [e["payload"] for e in log if e["event_type"] == "CYCLE_END"]
    assert [e["final_reflection"] for e in ends] == [
        f"Reflection {c}: {w}."
        for c, w in enumerate(["native", "json", "fenced", "tagged", "react", "recovered"], start=1)
    ]
    assert all(e["flags"] == [] for e in ends)
    calls = [
        (e["payload"]["tool_name"], e["payload"]["error"])
        for e in log
        if e["event_type"] == "TOOL_CALL"
    ]
    assert calls == [
        ("write", False),
        ("write", False),
        ("write", False),
        ("write", False),
        ("delete", False),
        ("read", False),
        ("delete", False),
        ("fly", True),
        ("write", False),
    ]

    # The malformed call got a corrective user turn naming the valid tools, not a reflection.
    corrective = [
        m["content"]
        for r in requests
        for m in r["messages"]
        if m["role"] == "user" and "write" in m["content"] and "pattern_search" in m["content"]
    ]
    assert corrective, "no corrective turn naming the tools was sent"
    # The unknown tool's result names the valid tools too.
    unknown = next(
        e["payload"]["output"]
        for e in log
        if e["event_type"] == "TOOL_CALL" and e["payload"]["tool_name"] == "fly"
    )
    assert all(name in unknown for name in TOOLS)
    # Text-format calls travel back as assistant tool calls, each followed by its result.
    for body in requests:
        assert_pairs(body["messages"])


def assert_pairs(messages: list[dict[str, Any]]) -> None:
    """Every run of tool results follows an assistant message with that many calls."""
    i = 0
    while i < len(messages):
        if messages[i]["role"] == "tool":
            j = i
            while j < len(messages) and messages[j]["role"] == "tool":
                j += 1
            caller = messages[i - 1]
            assert caller["role"] == "assistant" and len(caller.get("tool_calls") or []) == j - i, (
                f"tool results at {i}..{j - 1} do not follow their call"
            )
            i = j
        else:
            i += 1


@pytest.mark.parametrize(("steps", "calls"), [(10, 4), (3, 20)])
def test_looping_model_is_stopped_by_budgets(
    tmp_path: Path, sqlite_backend: Backend, steps: int, calls: int
) -> None:
    with StubServer(agent=LooperAgent()).start() as server:
        config = write_config(
            tmp_path / "c.yaml",
            sqlite_backend,
            run_id="loop",
            cycles=2,
            ollama={"host": server.url},
            limits={"max_steps_per_cycle": steps, "max_tool_calls_per_cycle": calls},
        )
        result = cli_in_process(sqlite_backend, "run", str(config))
        requests = [r["body"] for r in server.requests()]
    assert result.returncode == 0, result.stderr
    allowed = min(calls, steps - 1)
    ends = [
        e["payload"] for e in read_log(sqlite_backend, "loop") if e["event_type"] == "CYCLE_END"
    ]
    assert [e["metrics"]["tool_calls"] for e in ends] == [allowed, allowed]
    assert [e["final_reflection"] for e in ends] == [
        "Done looping in cycle 1.",
        "Done looping in cycle 2.",
    ]
    for cycle in (1, 2):
        sent = [r for r in requests if ChatRequest.from_body(r).cycle == cycle]
        assert len(sent) == allowed + 1
        assert all(r.get("tools") for r in sent[:-1]) and not sent[-1].get("tools"), (
            "the request after the budget must carry no tools"
        )


def test_empty_answers_are_nudged(tmp_path: Path, sqlite_backend: Backend) -> None:
    script = {1: ["", "Reflection after a nudge."], 2: ["", "", "", ""]}
    with scripted_stub(script) as server:
        config = write_config(
            tmp_path / "c.yaml",
            sqlite_backend,
            run_id="quiet",
            cycles=2,
            ollama={"host": server.url},
        )
        result = cli_in_process(sqlite_backend, "run", str(config))
        requests = [r["body"] for r in server.requests()]
    assert result.returncode == 0, result.stderr
    ends = [
        e["payload"] for e in read_log(sqlite_backend, "quiet") if e["event_type"] == "CYCLE_END"
    ]
    assert (
        ends[0]["final_reflection"] == "Reflection after a nudge."
        and ends[0]["metrics"]["nudges"] == 1
    )
    assert ends[1]["final_reflection"] == "" and "empty_reflection" in ends[1]["flags"]
    assert ends[1]["metrics"]["nudges"] == 2 and ends[1]["metrics"]["steps"] == 3
    second = requests[1]["messages"]
    assert second[-2]["role"] == "assistant" and second[-1]["role"] == "user"
    # The empty reflection is shown as such to cycle 2, and never as a nudge text.
    assert "Cycle 1: Reflection after a nudge." in requests[2]["messages"][0]["content"]


class LongCycleAgent:
    """Writes 20 keys of 5 kB, reads 19 back, then answers.

    It decides from the last message only, so trimming the history cannot confuse it.
    """

    VALUE = "x" * 5000

    def respond(self, req: ChatRequest) -> Reply:
        last = req.messages[-1]
        content = str(last.get("content") or "")
        if last["role"] == "user":
            return Reply(
                tool_calls=[{"name": "write", "arguments": {"key": "k00", "value": self.VALUE}}]
            )
        created = re.match(r"Created memory 'k(\d\d)'", content)
        if created and int(created.group(1)) < 19:
            key = f"k{int(created.group(1)) + 1:02d}"
            return Reply(
                tool_calls=[{"name": "write", "arguments": {"key": key, "value": self.VALUE}}]
            )
        if created:
            return Reply(tool_calls=[{"name": "read", "arguments": {"key": "k00"}}])
        reads = sum(
            1 for m in req.messages if m["role"] == "tool" and m.get("content") == self.VALUE
        )
        done = int(req.messages[-2]["tool_calls"][0]["function"]["arguments"]["key"][1:])
        if done < 18:
            return Reply(tool_calls=[{"name": "read", "arguments": {"key": f"k{done + 1:02d}"}}])
        return Reply(content=f"Cycle done after {reads} reads in view.")


def wire_tokens(body: dict[str, Any]) -> int:
    """The prompt's size in tokens as the engine estimates it, measured on the wire."""
    total = 0
    for m in body["messages"]:
        total += estimate_tokens(str(m.get("content") or "")) + 4
        for call in m.get("tool_calls") or []:
            total += estimate_tokens(
                call["function"]["name"] + json.dumps(call["function"]["arguments"])
            )
    if body.get("tools"):
        total += estimate_tokens(json.dumps(body["tools"]))
    return total


def test_forty_steps_in_a_small_context(tmp_path: Path, sqlite_backend: Backend) -> None:
    with StubServer(agent=LongCycleAgent()).start() as server:
        config = write_config(
            tmp_path / "c.yaml",
            sqlite_backend,
            run_id="long",
            cycles=1,
            ollama={"host": server.url},
            model_options={"num_ctx": 4096},
            limits={
                "max_steps_per_cycle": 40,
                "max_tool_calls_per_cycle": 40,
                "output_reserve_tokens": 1024,
            },
        )
        result = cli_in_process(sqlite_backend, "run", str(config))
        requests = [r["body"] for r in server.requests()]
    assert result.returncode == 0, result.stderr
    assert len(requests) == 40
    budget = 4096 - 1024
    sizes = [wire_tokens(b) for b in requests]
    assert max(sizes) <= budget, f"a prompt of {max(sizes)} tokens exceeded the budget of {budget}"
    for body in requests:
        assert body["messages"][1]["content"] == "Cycle 1 begins.", "the opening turn was dropped"
        assert_pairs(body["messages"])
    log = read_log(sqlite_backend, "long")
    assert sum(e["event_type"] == "CONTEXT_TRIM" for e in log) >= 20
    assert len(json.loads(cli_in_process(sqlite_backend, "memory", "long", "--json").stdout)) == 20
    end = next(e["payload"] for e in log if e["event_type"] == "CYCLE_END")
    assert end["metrics"]["steps"] == 40 and end["flags"] == []


def test_wall_clock_limit_closes_the_cycle(tmp_path: Path, sqlite_backend: Backend) -> None:
    with StubServer(agent=LooperAgent(), latency_ms=300).start() as server:
        config = write_config(
            tmp_path / "c.yaml",
            sqlite_backend,
            run_id="slow",
            cycles=1,
            ollama={"host": server.url},
            limits={"cycle_seconds": 0.5},
        )
        result = cli_in_process(sqlite_backend, "run", str(config))
        requests = [r["body"] for r in server.requests()]
    assert result.returncode == 0, result.stderr
    end = next(
        e["payload"] for e in read_log(sqlite_backend, "slow") if e["event_type"] == "CYCLE_END"
    )
    assert end["metrics"]["out_of_time"] is True and end["flags"] == []
    assert end["final_reflection"] == "Done looping in cycle 1."
    assert 1 <= end["metrics"]["tool_calls"] <= 3, "the loop should stop soon after 0.5 s"
    assert requests[-1].get("tools") in (None, []) and all(r.get("tools") for r in requests[:-1])


DIALECTS = {
    1: [
        # The call format's placeholders echoed back, then markup no layer can read: both
        # get a corrective turn, neither becomes the reflection.
        text("Action: the tool name\nAction Input: the argument as JSON"),
        text("Let me save that. <|tool_calls_section_begin|>"),
        text('[TOOL_CALLS]write[ARGS]{"key": "m", "value": "mistral"}'),
        text("Reflection 1: dialects."),
    ],
    2: [
        text(
            "<|channel|>commentary to=functions.write <|constrain|>json"
            '<|message|>{"key": "h", "value": "harmony"}<|call|>'
        ),
        text(
            "<|channel|>analysis<|message|>Done.<|end|>"
            "<|start|>assistant<|channel|>final<|message|>Reflection 2: harmony.<|return|>"
        ),
    ],
}


def test_dialects_run_and_unreadable_output_is_corrected(
    tmp_path: Path, sqlite_backend: Backend
) -> None:
    with scripted_stub(DIALECTS) as server:
        config = write_config(
            tmp_path / "c.yaml",
            sqlite_backend,
            run_id="dialects",
            cycles=2,
            ollama={"host": server.url},
        )
        result = cli_in_process(sqlite_backend, "run", str(config))
        requests = [r["body"] for r in server.requests()]
    assert result.returncode == 0, result.stderr
    memory = json.loads(cli_in_process(sqlite_backend, "memory", "dialects", "--json").stdout)
    assert memory == {"m": "mistral", "h": "harmony"}

    log = read_log(sqlite_backend, "dialects")
    ends = [e["payload"] for e in log if e["event_type"] == "CYCLE_END"]
    assert [e["final_reflection"] for e in ends] == [
        "Reflection 1: dialects.",
        "Reflection 2: harmony.",
    ]
    assert ends[0]["flags"] == ["echoed_placeholder_call", "unreadable_markup"]
    assert ends[1]["flags"] == []
    failures = [
        (e["cycle_number"], e["payload"]["step"], e["payload"]["kind"])
        for e in log
        if e["event_type"] == "ERROR"
    ]
    assert failures == [(1, 0, "echoed_placeholder_call"), (1, 1, "unreadable_markup")]
    # The model was told what went wrong, in the turn after each.
    turns = [m["content"] for m in requests[2]["messages"] if m["role"] == "user"]
    assert any("placeholders" in t for t in turns) and any("markup" in t for t in turns)
