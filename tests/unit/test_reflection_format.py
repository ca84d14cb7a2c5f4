"""Structured reflections (docs/config.md): the check, the config, the prompt section.

A final answer with `reflection: {format: json}` is held to its schema like tool arguments
are (`coerce_arguments`), stored as canonical JSON, and the system prompt names the format
only when it is asked for; text mode's prompt is byte for byte what it was.
"""

from __future__ import annotations

import hashlib
import json

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from contreact.checkpoints.cycles import Note
from contreact.config import ConfigError, parse_config
from contreact.config.sections import REFLECTION_SCHEMA_FILE
from contreact.graph.state import Context
from contreact.nodes.prompts import (
    REFLECTION_FORMAT_HEADING,
    SYSTEM_PROMPT,
    build_prompt,
    system_text,
)
from contreact.text.reflection_format import Accepted, Rejected, check_reflection, prose_of

SCHEMA = json.loads(REFLECTION_SCHEMA_FILE.read_text(encoding="utf-8"))


def accepted(answer: str) -> Accepted:
    checked = check_reflection(answer, SCHEMA)
    assert isinstance(checked, Accepted), checked
    return checked


def problem(answer: str, schema: dict[str, object] = SCHEMA) -> str:
    checked = check_reflection(answer, schema)
    assert isinstance(checked, Rejected), checked
    return checked.problem


def test_the_bundled_schema_is_the_papers_reflection_and_plan_template() -> None:
    assert SCHEMA["required"] == ["reflection", "plan"]
    assert "arXiv:2509.21224" in SCHEMA["$comment"]
    assert "reflection and plan template" in SCHEMA["$comment"]


def test_a_valid_answer_is_stored_as_canonical_json() -> None:
    one = accepted('{"plan": "Read it back.", "reflection": "I wrote a note."}')
    two = accepted(
        '```json\n{\n  "reflection": "I wrote a note.",\n  "plan": "Read it back."\n}\n```'
    )
    assert one == two, "key order, whitespace and a code fence make no difference"
    assert one.text == '{"reflection": "I wrote a note.", "plan": "Read it back."}'
    assert one.fields == {"reflection": "I wrote a note.", "plan": "Read it back."}
    # Coerced like a tool argument: a number where the schema wants text becomes its text.
    assert accepted('{"reflection": "r", "plan": 3}').fields["plan"] == "3"
    assert accepted('{"reflection": "Grüße", "plan": "p"}').text.count("Grüße") == 1


@pytest.mark.parametrize(
    ("answer", "fragment"),
    [
        ("I wrote a note and will read it back.", "plain text, not a JSON object"),
        ('{"reflection": "r", "plan": ', "not valid JSON"),
        ('Here it is: {"reflection": "r", "plan": "p"}', "text before the JSON object"),
        ('{"reflection": "r", "plan": "p"} Hope that helps.', "text after the JSON object"),
        ('["reflection", "plan"]', "an array, not a JSON object"),
        ('{"reflection": "r"}', "missing required field(s): plan"),
        ('{"reflection": "r", "plan": "p", "mood": "calm"}', "unexpected field(s): mood"),
        ('{"reflection": "r", "plan": {"a": 1}, "x": NaN}', "not valid JSON"),
        ("```json\n```", "empty"),
    ],
)
def test_what_is_wrong_is_named(answer: str, fragment: str) -> None:
    assert fragment in problem(answer)


def test_a_custom_schema_is_held_to_its_types() -> None:
    schema = {
        "type": "object",
        "properties": {
            "mood": {"type": "string", "enum": ["calm", "busy"]},
            "n": {"type": "integer"},
        },
        "required": ["mood", "n"],
    }
    assert check_reflection('{"mood": "calm", "n": "4"}', schema) == Accepted(
        '{"mood": "calm", "n": 4}', {"mood": "calm", "n": 4}
    )
    assert "mood" in problem('{"mood": "sad", "n": 4}', schema)
    assert 'field "n"' in problem('{"mood": "calm", "n": "four"}', schema)


def test_similarity_compares_the_words_not_the_field_names() -> None:
    assert prose_of('{"reflection": "a b", "plan": "c"}') == "a b\nc"
    assert prose_of("free text") == "free text"


# ------------------------------------------------------------------------------ config


def base(**reflection: object) -> dict[str, object]:
    return {"run_id": "r", "model": "m", "reflection": reflection}


def test_text_is_the_default_and_has_no_schema() -> None:
    config = parse_config({"run_id": "r", "model": "m"})
    assert config.reflection.format == "text"
    assert Context.of(config).reflection_schema is None
    assert Context().reflection_schema is None


def test_json_without_a_schema_gets_the_bundled_one_written_into_the_config() -> None:
    config = parse_config(base(format="json"))
    assert Context.of(config).reflection_schema == SCHEMA
    stored = config.model_dump(mode="json")
    assert stored["reflection"] == {"format": "json", "schema": SCHEMA}
    assert parse_config(stored) == config, "the stored config reads back as itself"


def test_a_custom_schema_is_used() -> None:
    schema = {"type": "object", "properties": {"next": {"type": "string"}}, "required": ["next"]}
    assert Context.of(parse_config(base(format="json", schema=schema))).reflection_schema == schema


@pytest.mark.parametrize(
    ("reflection", "fragment"),
    [
        ({"format": "yaml"}, "`reflection.format`: Input should be 'text' or 'json'"),
        ({"format": "text", "schema": SCHEMA}, "`schema` needs `format: json`"),
        ({"format": "json", "schema": "plan"}, "`reflection.schema`: not a usable reflection"),
        ({"format": "json", "schema": {"type": "array"}}, "type must be object"),
        ({"format": "json", "schema": {"type": "object"}}, "properties must name at least one"),
        (
            {"format": "json", "schema": {"properties": {"plan": {"type": "str"}}}},
            "properties.plan.type 'str' is not a JSON type",
        ),
        (
            {"format": "json", "schema": {"properties": {"plan": {}}, "required": ["why"]}},
            "required names 'why', which is not in properties",
        ),
        ({"format": "json", "shema": {}}, "unknown key `reflection.shema` (did you mean"),
    ],
)
def test_a_bad_reflection_setting_is_named(reflection: dict[str, object], fragment: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config({"run_id": "r", "model": "m", "reflection": reflection}, "exp.yaml")
    assert str(caught.value).startswith("exp.yaml: ")
    assert fragment in str(caught.value)


# ------------------------------------------------------------------------------ prompt


def prompt_digest(**extra: object) -> str:
    notes = [Note(1, "Cycle 1 begins.", "one"), Note(2, "Cycle 2 begins.", "two")]
    messages = [
        HumanMessage("Cycle 3 begins.", id="o"),
        AIMessage("", tool_calls=[{"name": "list", "args": {}, "id": "c1"}], id="a"),
        ToolMessage("No keys.", tool_call_id="c1", name="list", id="t"),
    ]
    prompt = build_prompt(notes, messages, advisory="Try something new.", text_tools=True, **extra)  # type: ignore[arg-type]
    return hashlib.sha256(json.dumps([(m.type, m.content) for m in prompt]).encode()).hexdigest()


def test_text_mode_prompts_are_byte_identical_to_before() -> None:
    # Digest of this prompt as built before structured reflections existed.
    before = "52d1b266ab2c327af532f52abe69018f7bda9d3726b5ce242f149ebe4a7118f5"
    assert prompt_digest() == before
    assert prompt_digest(reflection_schema=Context().reflection_schema) == before


def test_json_mode_states_the_format_after_the_verbatim_prompt() -> None:
    text = system_text([Note(1, "", "n")], advisory="Be different.", reflection_schema=SCHEMA)
    assert text.startswith(SYSTEM_PROMPT + "\n\n" + REFLECTION_FORMAT_HEADING + "\n\n")
    section = text.split(REFLECTION_FORMAT_HEADING)[1]
    shown = json.loads(section.split("```json\n")[1].split("\n```")[0])
    assert shown["required"] == ["reflection", "plan"] and "$comment" not in shown
    assert text.index(REFLECTION_FORMAT_HEADING) < text.index("Cycle 1: n")
    assert text.index("Cycle 1: n") < text.index("Be different.")
    assert REFLECTION_FORMAT_HEADING not in system_text([Note(1, "", "n")])
