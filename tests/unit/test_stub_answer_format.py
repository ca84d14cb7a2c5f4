"""The stub and a request's `format`: scripted answers shaped as a grammar would force them.

The scripted agents reshape their answer to constrained mode's schema (a bare JSON call of
an admitted tool, else the final branch filled from the note); the real backend turns the
schema into a llama.cpp grammar, and refuses a `format` Ollama would refuse.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from contreact.config.sections import default_reflection_schema
from contreact.nodes.constrained_format import FINAL_ACTION, answer_schema
from contreact.stub import ChatRequest, Reply
from contreact.stub.agents import ScriptedAgent, SimulatedAgent
from contreact.stub.answer_format import shaped
from contreact.stub.grammars import grammar_for
from contreact.tools.registry import TOOL_SCHEMAS, Toolset

CALLS = answer_schema(TOOL_SCHEMAS, None, tools=True)
FINAL = answer_schema(TOOL_SCHEMAS, None, tools=False)


def request(answer_format: Any, *, step: int = 0) -> ChatRequest:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are an agent."},
        {"role": "user", "content": "Cycle 2 begins."},
    ]
    for i in range(step):
        messages += [
            {"role": "assistant", "content": json.dumps({"name": "list", "arguments": {}})},
            {"role": "user", "content": f"<tool_response>{i}</tool_response>"},
        ]
    return ChatRequest(model="m", messages=messages, format=answer_format)


READ = {"name": "read", "arguments": {"key": "k"}}


def test_the_format_s_tools_are_the_offered_tools() -> None:
    assert request(CALLS).tool_names == [t["function"]["name"] for t in TOOL_SCHEMAS]
    assert request(CALLS).tools_offered
    assert not request(FINAL).tools_offered, "withdrawn: the format admits the answer only"
    narrow = answer_schema(Toolset.of(disable=["delete"]).schemas, None, tools=True)
    assert "delete" not in request(narrow).tool_names
    assert request(None).tool_names == [] and request("json").tool_names == []


def test_a_call_of_an_admitted_tool_becomes_the_bare_json_call() -> None:
    reply = shaped(Reply(tool_calls=[READ, {"name": "list", "arguments": {}}]), CALLS, 2)
    assert json.loads(reply.content) == READ and reply.tool_calls == [], "one call at most"


def test_anything_else_fills_the_final_branch() -> None:
    note = shaped(Reply(content="I looked around. Next I will write."), CALLS, 2)
    assert json.loads(note.content) == {
        "action": FINAL_ACTION,
        "action_input": "I looked around. Next I will write.",
    }
    held = shaped(Reply(tool_calls=[READ]), FINAL, 2)
    assert json.loads(held.content)["action_input"] == "Tools withdrawn; closing cycle 2."
    structured = answer_schema(TOOL_SCHEMAS, default_reflection_schema(), tools=False)
    fields = json.loads(shaped(Reply(content="I read. Next I write."), structured, 2).content)
    assert fields == {"reflection": "I read.", "plan": "Next I write."}


def test_json_already_and_answers_without_a_schema_stay_as_written() -> None:
    wrong = '{"name": "remember", "arguments": {}}'
    assert shaped(Reply(content=wrong), CALLS, 1).content == wrong
    assert shaped(Reply(tool_calls=[READ]), None, 1).tool_calls == [READ]
    assert shaped(Reply(content="text"), "json", 1).content == "text"


def test_the_scripted_agents_answer_in_the_format() -> None:
    scripted = ScriptedAgent({2: [{"tool_calls": [READ]}, "All done."]})
    assert json.loads(scripted.respond(request(CALLS)).content) == READ
    ended = json.loads(scripted.respond(request(CALLS, step=1)).content)
    assert ended == {"action": FINAL_ACTION, "action_input": "All done."}

    simulated = SimulatedAgent()
    first = json.loads(simulated.respond(request(CALLS)).content)
    assert first["name"] == "write" and set(first["arguments"]) == {"key", "value"}
    assert json.loads(simulated.respond(request(FINAL)).content)["action"] == FINAL_ACTION
    # The calls it made are read back from the bare JSON in the conversation.
    assert request(CALLS, step=2).cycle_tool_calls == [{"name": "list", "arguments": {}}] * 2


@pytest.mark.parametrize("bad", ["xml", 3, ["json"]])
def test_the_real_backend_refuses_a_format_ollama_refuses(bad: Any) -> None:
    with pytest.raises(ValueError, match='invalid format: expected "json" or a valid JSON schema'):
        grammar_for(bad)
    assert grammar_for(None) is None and grammar_for("") is None


def test_the_real_backend_s_grammar_writes_the_tool_s_name_first() -> None:
    # The schema's property order is the order the model must write in: a tool's name
    # before its arguments (a grammar of sorted keys would make it write arguments first).
    pytest.importorskip("llama_cpp")
    rules = grammar_for(CALLS)._grammar.splitlines()
    (first,) = [r for r in rules if r.startswith("alternative-0 ::=")]
    assert first.index("alternative-0-name-kv") < first.index("alternative-0-arguments-kv")
    assert grammar_for(CALLS) is grammar_for(json.loads(json.dumps(CALLS))), "compiled once"
