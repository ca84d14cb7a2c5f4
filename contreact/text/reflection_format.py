"""Structured reflections: a cycle's final answer as one JSON object that fits a schema.

Why this module exists: with `reflection: {format: json}` a researcher asks for the paper's
"reflection and plan template" (Szeider 2025, section 3) instead of free text, so that the fields
of every cycle's note (above all the plan) can be read by analysis. A final answer is
checked here the way a tool call's arguments are checked: with
`nodes.toolcalls.coerce_arguments` against the schema, so a number sent for a string
field is accepted as its text and a missing field is named. What is wrong goes back to
the model as a corrective turn (the `parse` node decides whether the cycle's budget
allows one).

An accepted reflection is stored as canonical JSON text (fields in the schema's order,
nested keys sorted, no ASCII escaping): the note that later cycles see is a pure function
of the fields, never of the model's whitespace or key order.

Everything here is pure: no I/O, no state.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from contreact.text.toolcalls import coerce_arguments

JSON_TYPES = ("string", "integer", "number", "boolean", "array", "object", "null")
"""The JSON schema types the coercion understands."""

_FENCE = re.compile(r"\A```[A-Za-z0-9_-]*[ \t]*\n(.*?)\n?```\Z", re.DOTALL)


@dataclass(frozen=True)
class Accepted:
    """A final answer that fits the schema.

    Attributes:
        text: The canonical JSON text stored as the cycle's reflection.
        fields: The coerced fields.
    """

    text: str
    fields: dict[str, Any]


@dataclass(frozen=True)
class Rejected:
    """A final answer that does not fit; `problem` says what is wrong, for the model."""

    problem: str


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _decode(text: str) -> Any | Rejected:
    """The one JSON value `text` holds, or what keeps it from being one."""
    start = text.find("{")
    if start < 0 and not text.startswith("["):
        return Rejected("it is plain text, not a JSON object")
    if start > 0 and not text.startswith("["):
        return Rejected("there is text before the JSON object; answer with the JSON object alone")
    decoder = json.JSONDecoder(parse_constant=_reject_constant)
    try:
        value, end = decoder.raw_decode(text)
    except ValueError as exc:
        where = (
            f" ({exc.msg}, line {exc.lineno} column {exc.colno})"
            if isinstance(exc, json.JSONDecodeError)
            else f" ({exc})"
        )
        return Rejected(f"it is not valid JSON{where}")
    if text[end:].strip():
        return Rejected("there is text after the JSON object; answer with the JSON object alone")
    return value


def _sorted(value: Any) -> Any:
    """`value` with the keys of every nested object sorted (canonical form)."""
    if isinstance(value, dict):
        return {k: _sorted(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_sorted(v) for v in value]
    return value


def canonical(fields: Mapping[str, Any], schema: Mapping[str, Any]) -> str:
    """The canonical JSON text of a reflection's fields.

    Fields the schema lists come first, in its order; any others (allowed by
    `additionalProperties`) follow sorted; nested objects have sorted keys.
    """
    order = list(schema.get("properties") or {})
    keys = [k for k in order if k in fields] + sorted(k for k in fields if k not in order)
    return json.dumps({k: _sorted(fields[k]) for k in keys}, ensure_ascii=False)


def _in_field_words(problem: str) -> str:
    """The coercer's wording for tool arguments, said of a reflection's fields."""
    return (
        problem.replace("missing required argument(s)", "missing required field(s)")
        .replace("unexpected argument(s)", "unexpected field(s)")
        .replace('argument "', 'field "')
        .replace("the arguments must be", "the reflection must be")
    )


def check_reflection(answer: str, schema: Mapping[str, Any]) -> Accepted | Rejected:
    """Check a final answer (thinking already stripped) against the reflection schema.

    The answer must be one JSON object, optionally in a code fence, with nothing before
    or after it; its fields are coerced to the schema exactly as tool arguments are.

    Returns:
        `Accepted` with the canonical text and the fields, or `Rejected` naming the
        problem.
    """
    text = answer.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1).strip()
    if not text:
        return Rejected("it is empty")
    value = _decode(text)
    if isinstance(value, Rejected):
        return value
    if not isinstance(value, dict):
        kind = "an array" if isinstance(value, list) else f"the value {json.dumps(value)[:40]}"
        return Rejected(f"it is {kind}, not a JSON object")
    fields, problem = coerce_arguments(value, schema)
    if problem:
        return Rejected(_in_field_words(problem))
    return Accepted(canonical(fields, schema), fields)


def correction(problem: str) -> str:
    """The corrective user turn after a final answer that is not a valid reflection."""
    return (
        f"Your final response could not be stored as your note: {problem}. "
        "Write it again as one JSON object that fits the schema in the system prompt "
        "(section 'Format of your final response'), with nothing before or after it."
    )


def fields_of(reflection: str) -> dict[str, Any] | None:
    """The fields of a stored reflection, or None when it is not a JSON object."""
    try:
        value = json.loads(reflection)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def prose_of(reflection: str) -> str:
    """A reflection's words without the JSON around them, one field per line.

    The similarity monitor compares these: the field names every structured note shares
    would otherwise make unrelated notes look alike.
    """
    fields = fields_of(reflection)
    if fields is None:
        return reflection
    return "\n".join(
        v if isinstance(v, str) else json.dumps(v, ensure_ascii=False) for v in fields.values()
    )


def shown_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The schema as the model is shown it: without `$comment`, `$schema` and other `$` keys."""
    return {k: v for k, v in schema.items() if not str(k).startswith("$")}


def schema_problems(schema: Any) -> list[str]:
    """What makes `schema` unusable as a reflection schema (empty: usable).

    A reflection is a JSON object, so the schema must describe one with at least one
    field, each field's `type` one of `JSON_TYPES`, and `required` naming listed fields.
    """
    if not isinstance(schema, Mapping):
        return ["must be a mapping, e.g. {type: object, properties: {plan: {type: string}}}"]
    problems: list[str] = []
    try:
        json.dumps(schema, allow_nan=False)
    except (TypeError, ValueError) as exc:
        problems.append(f"must hold JSON values only ({exc})")
    kind = schema.get("type", "object")
    if kind != "object":
        problems.append(f"type must be object (a reflection is a JSON object), not {kind!r}")
    props = schema.get("properties")
    if not isinstance(props, Mapping) or not props:
        problems.append("properties must name at least one field, e.g. {plan: {type: string}}")
        props = {}
    for name, spec in props.items():
        if not isinstance(spec, Mapping):
            problems.append(f"properties.{name} must be a mapping such as {{type: string}}")
            continue
        types = spec.get("type")
        for t in [] if types is None else types if isinstance(types, list) else [types]:
            if t not in JSON_TYPES:
                problems.append(
                    f"properties.{name}.type {t!r} is not a JSON type ({', '.join(JSON_TYPES)})"
                )
        if "enum" in spec and not isinstance(spec["enum"], list):
            problems.append(f"properties.{name}.enum must be a list")
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        problems.append("required must be a list of field names")
    else:
        for name in required:
            if name not in props:
                problems.append(f"required names {name!r}, which is not in properties")
    extra = schema.get("additionalProperties", False)
    if not isinstance(extra, bool | Mapping):
        problems.append("additionalProperties must be true, false or a schema")
    return problems
