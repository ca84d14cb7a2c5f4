"""Constrained tool mode's `format`: exactly one call of an offered tool, or the final answer.

Checked with a JSON-schema validator (jsonschema-rs, which the dev extra's LangGraph
server brings), the way Ollama's grammar would hold the model to it, and read back by the
parser the way the parse node reads an answer.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from contreact.config.sections import default_reflection_schema
from contreact.nodes.constrained_format import EXAMPLE_CALL, FINAL_ACTION, answer_schema
from contreact.text.reflection_format import Accepted, check_reflection
from contreact.text.toolcalls import FinalAnswer, ToolCalls, parse_response
from contreact.tools.registry import PARAMETER_SCHEMAS, TOOL_SCHEMAS, Toolset

jsonschema_rs = pytest.importorskip("jsonschema_rs")

WITH_TOOLS = answer_schema(TOOL_SCHEMAS, None, tools=True)
FINAL_ONLY = answer_schema(TOOL_SCHEMAS, None, tools=False)
DEFAULT_REFLECTION_SCHEMA = default_reflection_schema()
STRUCTURED = answer_schema(TOOL_SCHEMAS, DEFAULT_REFLECTION_SCHEMA, tools=True)


def admits(schema: dict[str, Any], answer: Any) -> bool:
    return bool(jsonschema_rs.validator_for(schema).is_valid(answer))


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def final(text: str) -> dict[str, Any]:
    return {"action": FINAL_ACTION, "action_input": text}


def test_the_schema_is_valid_json_schema() -> None:
    for schema in (WITH_TOOLS, FINAL_ONLY, STRUCTURED):
        jsonschema_rs.meta.validate(schema)
        json.dumps(schema)  # sent as it is


def test_a_call_of_an_offered_tool_is_admitted() -> None:
    assert admits(WITH_TOOLS, call("write", key="k", value="v"))
    assert admits(WITH_TOOLS, call("read", key="k"))
    assert admits(WITH_TOOLS, call("list"))
    assert admits(WITH_TOOLS, call("send_message_to_operator", message="hello"))
    assert admits(WITH_TOOLS, json.loads(EXAMPLE_CALL)), "the prompt's example fits"


@pytest.mark.parametrize(
    "answer",
    [
        call("remember", key="k", value="v"),  # no such tool
        call("Write", key="k", value="v"),  # names are exact
        call("write", key="k"),  # a required argument missing
        call("write", key="k", value="v", mood="calm"),  # an argument the tool lacks
        call("read", key=3),  # the wrong type
        call("read", path="k"),  # another tool's argument name
        {"name": "read"},  # no arguments
        {"name": "read", "arguments": {"key": "k"}, "thought": "x"},  # more than a call
        [call("read", key="k"), call("list")],  # two calls
        {"tool": "read", "tool_input": {"key": "k"}},  # another dialect
        "I will read my notes.",  # prose
    ],
)
def test_anything_but_one_valid_call_or_the_final_answer_is_refused(answer: Any) -> None:
    assert not admits(WITH_TOOLS, answer)


def test_the_final_answer_is_admitted_with_or_without_tools() -> None:
    for schema in (WITH_TOOLS, FINAL_ONLY):
        assert admits(schema, final("I explored my memory."))
        assert not admits(schema, {"action": "Finish", "action_input": "done"})
        assert not admits(schema, {"action": FINAL_ACTION, "action_input": {"note": "x"}})


def test_withdrawn_tools_leave_only_the_final_answer() -> None:
    assert not admits(FINAL_ONLY, call("read", key="k"))
    assert not admits(FINAL_ONLY, call("list"))
    assert FINAL_ONLY == WITH_TOOLS["anyOf"][-1]
    assert answer_schema([], None, tools=True) == FINAL_ONLY, "no tools: nothing else to admit"


def test_a_structured_run_ends_with_its_reflection_object() -> None:
    note = {"reflection": "I wrote a key.", "plan": "Read it back."}
    assert admits(STRUCTURED, note)
    assert admits(STRUCTURED, call("read", key="k"))
    assert not admits(STRUCTURED, final("free text"))
    assert not admits(STRUCTURED, {"reflection": "only half"})
    assert "$comment" not in json.dumps(STRUCTURED), "the schema as the model is shown it"


def test_only_the_run_s_tools_are_offered() -> None:
    toolset = Toolset.of(disable=["delete", "pattern_search"])
    schema = answer_schema(toolset.schemas, None, tools=True)
    assert admits(schema, call("read", key="k"))
    assert not admits(schema, call("delete", key="k"))
    names = [b["properties"]["name"]["const"] for b in schema["anyOf"][:-1]]
    assert names == toolset.names


def test_the_parser_reads_what_the_schema_admits() -> None:
    text = json.dumps(call("write", key="k", value="v"))
    parsed = parse_response(text, [], PARAMETER_SCHEMAS)
    assert isinstance(parsed, ToolCalls) and parsed.layer == "json"
    ((read,),) = [parsed.calls]
    assert (read.name, read.args, read.error) == ("write", {"key": "k", "value": "v"}, None)

    # What a grammar allows in between: whitespace and newlines.
    spaced = '{ "name" : "list" ,\n "arguments" : { } }'
    parsed = parse_response(spaced, [], PARAMETER_SCHEMAS)
    assert isinstance(parsed, ToolCalls) and parsed.calls[0].name == "list"

    ended = parse_response(json.dumps(final("My note: keep going.")), [], PARAMETER_SCHEMAS)
    assert ended == FinalAnswer("My note: keep going.")

    note = json.dumps({"reflection": "I wrote a key.", "plan": "Read it back."})
    ended = parse_response(note, [], PARAMETER_SCHEMAS)
    assert isinstance(ended, FinalAnswer)
    assert isinstance(check_reflection(ended.text, DEFAULT_REFLECTION_SCHEMA), Accepted)
