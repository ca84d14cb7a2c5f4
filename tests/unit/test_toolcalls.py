"""Tests for contreact/text/toolcalls/: the corpus of model messages, units, and properties."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contreact.text.toolcalls import (
    INTERNAL_ERROR_PREFIX,
    FinalAnswer,
    NoAnswer,
    ParsedCall,
    ToolCalls,
    call_signature,
    coerce_arguments,
    empty_feedback,
    malformed_feedback,
    parse_response,
    server_parse_error,
    strip_thinking,
)
from support.paths import DATA

CORPUS_PATH = DATA / "parser_corpus.yaml"
CORPUS: dict[str, Any] = yaml.safe_load(CORPUS_PATH.read_text(encoding="utf-8"))
SCHEMAS: dict[str, Any] = CORPUS["tools"]
CASES: list[dict[str, Any]] = CORPUS["cases"]
REAL_TOOLS = ["write", "read", "list", "delete", "pattern_search", "send_message_to_operator"]
OUTCOMES = {"calls": ToolCalls, "final": FinalAnswer, "empty": NoAnswer, "malformed": NoAnswer}


def _content(case: dict[str, Any]) -> str:
    content: str = case.get("content") or ""
    filler = case.get("filler")
    if filler:
        content = content.replace("{{FILLER}}", filler["text"] * filler["repeat"])
    return content


def _check_text(actual: str, expect: dict[str, Any]) -> None:
    if "text" in expect:
        assert actual == expect["text"]
    if "text_startswith" in expect:
        assert actual.startswith(expect["text_startswith"])
    for part in expect.get("text_contains", []):
        assert part in actual
    for part in expect.get("text_excludes", []):
        assert part not in actual


# ----------------------------------------------------------------------------- corpus


def test_corpus_is_big_enough_and_ids_unique() -> None:
    ids = [case["id"] for case in CASES]
    assert len(ids) >= 60
    assert len(ids) == len(set(ids))
    assert set(REAL_TOOLS) <= set(SCHEMAS)


@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_corpus_case(case: dict[str, Any]) -> None:
    expect = case["expect"]
    result = parse_response(_content(case), case.get("native") or [], SCHEMAS)

    assert isinstance(result, OUTCOMES[expect["outcome"]]), result
    if isinstance(result, ToolCalls):
        assert result.layer == expect["layer"]
        _check_text(result.text, expect)
        assert len(result.calls) == len(expect["calls"]), result.calls
        for call, want in zip(result.calls, expect["calls"], strict=True):
            assert call.name == want["name"]
            if "args" in want:
                assert call.args == want["args"]
            if "error" in want:
                assert (call.error is not None) == want["error"], call.error
            for part in want.get("error_contains", []):
                assert call.error is not None and part in call.error, call.error
    elif isinstance(result, FinalAnswer):
        assert result.text and result.text == result.text.strip()
        assert "<think" not in result.text.lower()
        _check_text(result.text, expect)
    else:
        assert isinstance(result, NoAnswer)
        assert result.kind == expect["outcome"]
        assert result.feedback
        assert not result.detail.startswith(INTERNAL_ERROR_PREFIX)
        for part in expect.get("feedback_contains", []):
            assert part in result.feedback
        for part in expect.get("detail_contains", []):
            assert part in result.detail
        if result.kind == "malformed":
            for tool in REAL_TOOLS:  # the corrective always names every valid tool
                assert tool in result.feedback


# ----------------------------------------------------------------------------- thinking


@pytest.mark.parametrize(
    ("text", "visible", "thinking"),
    [
        ("", "", ""),
        ("plain", "plain", ""),
        ("<think>a</think>b", "b", "a"),
        ("<Thinking>\nmulti\nline\n</THINKING>\nout", "\nout", "multi\nline"),
        ("x<think>y", "x", "y"),
        ("before</think>after", "after", "before"),
        ("<think>a<think>b</think>c", "c", "a<think>b"),
        ("<thi<think>x</think>nk>done", "", "x\ndone"),
    ],
    ids=[
        "empty",
        "plain",
        "block",
        "case-multiline",
        "unclosed",
        "stray-close",
        "no-nesting",
        "spliced-tag",
    ],
)
def test_strip_thinking(text: str, visible: str, thinking: str) -> None:
    assert strip_thinking(text) == (visible, thinking)


# ----------------------------------------------------------------------------- coercion

TIMER = SCHEMAS["set_timer"]


@pytest.mark.parametrize(
    ("args", "coerced", "error_parts"),
    [
        ({"seconds": 5}, {"seconds": 5}, None),
        ({"seconds": "5"}, {"seconds": 5}, None),
        ({"seconds": " -12 "}, {"seconds": -12}, None),
        ({"seconds": "3.0"}, {"seconds": 3}, None),
        ({"seconds": 4.0}, {"seconds": 4}, None),
        ({"seconds": "3.5"}, None, ["seconds", "integer"]),
        ({"seconds": True}, None, ["integer"]),
        ({"seconds": "9" * 5000}, None, ["integer"]),
        ({"seconds": 1, "loud": "tRuE"}, {"seconds": 1, "loud": True}, None),
        ({"seconds": 1, "loud": "no"}, None, ["loud", "boolean"]),
        ({"seconds": 1, "ratio": "1e3"}, {"seconds": 1, "ratio": 1000.0}, None),
        ({"seconds": 1, "ratio": "7"}, {"seconds": 1, "ratio": 7}, None),
        ({"seconds": 1, "ratio": "nan"}, None, ["ratio", "number"]),
        ({"seconds": 1, "label": 2.5}, {"seconds": 1, "label": "2.5"}, None),
        ({"seconds": 1, "label": False}, {"seconds": 1, "label": "false"}, None),
        ({"seconds": 1, "label": ["a", 1]}, {"seconds": 1, "label": '["a",1]'}, None),
        ({"seconds": 1, "label": None}, {"seconds": 1}, None),
        ({}, None, ["missing", "seconds"]),
        ({"seconds": None}, None, ["missing", "seconds"]),
        ({"seconds": 1, "colour": "red"}, None, ["unexpected", "colour"]),
    ],
)
def test_coerce_arguments(
    args: dict[str, Any], coerced: dict[str, Any] | None, error_parts: list[str] | None
) -> None:
    result, error = coerce_arguments(args, TIMER)
    if error_parts is None:
        assert error is None
        assert result == coerced
        assert type(result.get("seconds")) is int
    else:
        assert error is not None
        for part in error_parts:
            assert part in error
        assert "Expected:" in error


def test_coerce_arguments_generic_schema_features() -> None:
    schema = {
        "type": "object",
        "properties": {
            "tags": {"type": "array"},
            "meta": {"type": "object"},
            "mode": {"type": "string", "enum": ["a", "b"]},
            "maybe": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
            "free": {},
        },
        "additionalProperties": True,
    }
    args = {
        "tags": '["x"]',
        "meta": '{"k": 1}',
        "mode": "a",
        "maybe": "3",
        "free": {"z": 1},
        "other": 1,
    }
    assert coerce_arguments(args, schema) == (
        {"tags": ["x"], "meta": {"k": 1}, "mode": "a", "maybe": 3, "free": {"z": 1}, "other": 1},
        None,
    )
    _, error = coerce_arguments({"mode": "c"}, schema)
    assert error is not None and "one of" in error
    _, error = coerce_arguments(["not", "a", "mapping"], schema)  # type: ignore[arg-type]
    assert error is not None and "JSON object" in error


def test_no_argument_tool_rejects_arguments() -> None:
    assert coerce_arguments({}, SCHEMAS["list"]) == ({}, None)
    _, error = coerce_arguments({"key": "x"}, SCHEMAS["list"])
    assert error is not None and "unexpected" in error and "no arguments" in error


# ----------------------------------------------------------------------------- helpers


def test_call_signature_is_canonical() -> None:
    one = ParsedCall("write", {"key": "a", "value": "b"})
    two = ParsedCall("write", {"value": "b", "key": "a"})
    other = ParsedCall("write", {"key": "a", "value": "c"})
    assert call_signature(one) == call_signature(two) == 'write:{"key":"a","value":"b"}'
    assert call_signature(one) != call_signature(other)
    assert call_signature(ParsedCall("list", {})) == "list:{}"
    assert call_signature(ParsedCall("read", {"key": "日記"})) == 'read:{"key":"日記"}'
    odd = ParsedCall("x", {"a": object(), "b": {1: 2}})
    assert call_signature(odd).startswith("x:")


def test_feedback_texts() -> None:
    feedback = malformed_feedback("invalid JSON", SCHEMAS)
    for tool in REAL_TOOLS:
        assert tool in feedback
    assert "invalid JSON" in feedback
    assert "write(key, value)" in feedback and "list()" in feedback
    assert "set_timer(seconds, loud?, ratio?, label?)" in feedback
    assert empty_feedback().strip()
    assert "tool" in malformed_feedback("x", {})  # still usable with no tools


def test_server_parse_error() -> None:
    message = 'error parsing tool call: raw=\'{"name": "write", "argu\', err=unexpected end'
    result = server_parse_error(message, SCHEMAS)
    assert isinstance(result, NoAnswer)
    assert result.kind == "malformed"
    assert "error parsing tool call" in result.detail
    for tool in REAL_TOOLS:
        assert tool in result.feedback


def test_content_blocks_are_accepted() -> None:
    blocks: Any = [{"type": "text", "text": '{"name": "read", '}, '"arguments": {"key": "k"}}']
    result = parse_response(blocks, [], SCHEMAS)
    assert isinstance(result, ToolCalls)
    assert result.calls == (ParsedCall("read", {"key": "k"}),)


def test_garbage_native_entries_become_error_calls() -> None:
    natives: Any = [None, 5, {"args": {}}, {"name": 3, "args": []}, {"name": "read", "args": 7}]
    result = parse_response("", natives, SCHEMAS)
    assert isinstance(result, ToolCalls)
    assert result.layer == "native"
    assert len(result.calls) == 5
    assert all(call.error for call in result.calls)


# ----------------------------------------------------------------------------- robustness

ADVERSARIAL = {
    "nested-arrays": "[" * 50_000,
    "nested-objects": '{"a":' * 10_000,
    "nested-closed": '{"a":' * 3_000 + "1" + "}" * 3_000,
    "arrays-in-object": '{"a":' + "[" * 900 + "]" * 900 + "}",
    "open-braces": "{" * 50_000,
    "name-prefixes": '{"name":' * 6_000,
    "spaces-after-brace": "{" + " " * 50_000 + "x",
    "action-spaces": "Action" + " " * 50_000 + "x",
    "action-lines": "Action: read\n" * 4_000,
    "final-spaces": "Final" + " " * 50_000,
    "think-splices": "<thi" * 2_000 + "<think></think>" + "nk>" * 2_000,
    "think-tags": "<think></think>" * 3_000 + "done",
    "tool-call-tags": "<tool_call>" * 5_000,
    "function-tags": "<tool_call>" + "<function=write><parameter=key>" * 2_000,
    "quotes": '"' * 50_000,
    "backslashes": '{"name": "' + "\\" * 50_000,
    "crlf": "\r\n" * 25_000,
    "mistral-tokens": "[TOOL_CALLS]a" * 4_000,
    "deepseek-call-begins": "<｜tool▁call▁begin｜>" * 2_500,
    "kimi-call-begins": "<|tool_call_begin|>" * 2_500,
    "harmony-messages": "<|channel|>x<|message|>" * 2_000,
    "pythonic-unbalanced": "[a(" * 16_000,
    "pythonic-deep-parens": "[a(" + "(" * 50_000,
    "bare-function-tags": "<function=a>" * 4_000,
    "invoke-params": '<invoke name="a"><parameter name="b">' * 1_200,
    "recipient-lines": ">>>a\n" * 4_000,
    "xml-agent-tags": "<tool>a</tool><tool_input>" * 2_000,
    "tool-code-fences": "```tool_code\n" * 4_000,
    "special-token-starts": "<|" * 25_000,
    "glm-arg-keys": "<tool_call>a" + "<arg_key>k</arg_key><arg_value>" * 1_500,
    "whole-message-call": "write(" * 8_000 + ")",
    "call-colon-opens": "<start_function_call>call:a{" * 2_000,
    "call-colon-nesting": "<|tool_call>call:a{" + "b:{" * 16_000,
}


@pytest.mark.parametrize("text", list(ADVERSARIAL.values()), ids=list(ADVERSARIAL))
def test_adversarial_inputs_are_total(text: str) -> None:
    # How fast these parse is measured by benchmarks/cost/parser_speed.py, not asserted here.
    result = parse_response(text, [], SCHEMAS)
    assert isinstance(result, ToolCalls | FinalAnswer | NoAnswer)
    if isinstance(result, NoAnswer):
        assert not result.detail.startswith(INTERNAL_ERROR_PREFIX)
    if isinstance(result, FinalAnswer):
        assert "<think>" not in result.text


# ----------------------------------------------------------------------------- properties

JSON_SCALARS = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20)
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=20,
)
TOOL_NAMES = st.sampled_from([*REAL_TOOLS, "set_timer"]) | st.text(max_size=12)
CALL_OBJECTS = st.fixed_dictionaries(
    {"name": TOOL_NAMES},
    optional={"arguments": JSON_VALUES, "parameters": JSON_VALUES},
)
FRAGMENTS = st.one_of(
    st.text(max_size=40),
    st.sampled_from(
        [
            "<think>",
            "</think>",
            "<thinking>",
            "</THINK>",
            "<tool_call>",
            "</tool_call>",
            "```json\n",
            "```",
            "Action: ",
            "Action Input: ",
            "Final Answer: ",
            "Thought: ",
            "\n",
            "\r\n",
            "{",
            "}",
            '{"name": ',
            "[",
            "]",
            '"',
            "<function=read>",
            "<parameter=key>",
            "[TOOL_CALLS]",
            "write[ARGS]",
            "<｜tool▁call▁begin｜>",
            "<｜tool▁sep｜>",
            "<|tool_call_begin|>",
            "functions.write:0<|tool_call_argument_begin|>",
            "<|channel|>commentary to=functions.write<|message|>",
            "<|call|>",
            "[write(key='a', value='b')]",
            "```tool_code\n",
            ">>>write\n",
            '<invoke name="write">',
            '<parameter name="key">',
            "<tool>read</tool><tool_input>",
            "<arg_key>key</arg_key><arg_value>",
            "Action: the tool name\n",
            "<|START_THINKING|>",
            "<|END_THINKING|>",
        ]
    ),
    JSON_VALUES.map(json.dumps),
    CALL_OBJECTS.map(json.dumps),
    CALL_OBJECTS.map(lambda call: json.dumps(call)[:-3]),  # truncated call objects
)
EMBEDDED = st.lists(FRAGMENTS, max_size=12).map("".join)
NATIVE_ENTRIES = st.one_of(
    st.fixed_dictionaries(
        {"name": TOOL_NAMES},
        optional={"args": JSON_VALUES | JSON_VALUES.map(json.dumps) | st.text(max_size=20)},
    ),
    st.fixed_dictionaries({"function": CALL_OBJECTS}),
    st.dictionaries(st.text(max_size=5), JSON_VALUES, max_size=3),
)


def _check_outcome(result: object) -> None:
    kinds = [isinstance(result, kind) for kind in (ToolCalls, FinalAnswer, NoAnswer)]
    assert sum(kinds) == 1, result
    if isinstance(result, ToolCalls):
        assert result.calls
        assert all(isinstance(call.args, dict) for call in result.calls)
        assert "<think>" not in result.text.lower()
        for call in result.calls:
            call_signature(call)
    elif isinstance(result, FinalAnswer):
        assert result.text and result.text == result.text.strip()
        assert "<think>" not in result.text.lower()
        assert "</think>" not in result.text.lower()
    else:
        assert isinstance(result, NoAnswer)
        assert result.kind in ("empty", "malformed")
        assert result.feedback
        assert not result.detail.startswith(INTERNAL_ERROR_PREFIX), result.detail


PROPERTY_SETTINGS = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@PROPERTY_SETTINGS
@given(st.text())
def test_property_arbitrary_text(text: str) -> None:
    _check_outcome(parse_response(text, [], SCHEMAS))


@PROPERTY_SETTINGS
@given(EMBEDDED)
def test_property_embedded_json_tags_and_markers(text: str) -> None:
    _check_outcome(parse_response(text, [], SCHEMAS))


@PROPERTY_SETTINGS
@given(
    JSON_VALUES,
    st.sampled_from(
        [
            "{}",
            "```json\n{}\n```",
            "<tool_call>{}</tool_call>",
            "Action: write\nAction Input: {}",
            "note {} end",
        ]
    ),
)
def test_property_json_in_wrappers(value: Any, wrapper: str) -> None:
    _check_outcome(parse_response(wrapper.replace("{}", json.dumps(value)), [], SCHEMAS))


@PROPERTY_SETTINGS
@given(st.lists(NATIVE_ENTRIES, max_size=4), EMBEDDED)
def test_property_native_calls(natives: list[Any], text: str) -> None:
    result = parse_response(text, natives, SCHEMAS)
    _check_outcome(result)
    if natives:
        assert isinstance(result, ToolCalls) and result.layer == "native"
        assert len(result.calls) == len(natives)


@PROPERTY_SETTINGS
@given(EMBEDDED)
def test_property_strip_thinking_leaves_no_tags(text: str) -> None:
    visible, _thinking = strip_thinking(text)
    assert "<think>" not in visible.lower()
    assert "</think>" not in visible.lower()
    assert "<thinking>" not in visible.lower()
