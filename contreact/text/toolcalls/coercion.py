"""Argument coercion: make a call's arguments fit its tool's JSON schema, or say why not.

Small models send every value as a string (``"true"``, ``"42"``), numbers where strings
are expected, or JSON text for objects. What can be converted without guessing is; what
cannot becomes a corrective error naming every problem and the expected parameters.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from contreact.text.toolcalls.text import compact_json, json_type_name, preview, preview_value

_INT_TEXT = re.compile(r"[+-]?\d+")
_NUMBER_TEXT = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_TYPE_LABELS = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean (true or false)",
    "object": "a JSON object",
    "array": "a JSON array",
    "null": "null",
}


def coerce_arguments(
    args: Mapping[str, Any], schema: Mapping[str, Any]
) -> tuple[dict[str, Any], str | None]:
    """Coerce a call's arguments to its JSON schema and report what does not fit.

    Small models often send every value as a string (``"true"``, ``"42"``) or a number
    where a string is expected. Conversions: ``"true"``/``"false"`` (any case) to bool
    for boolean parameters; numeric strings to int/float for integer/number parameters
    (and integral floats to int); for string parameters a number or bool becomes its
    JSON text and an object or array becomes compact JSON text; strings holding JSON
    become objects/arrays for object/array parameters. ``None`` counts as "not given".
    Extra arguments are errors unless the schema sets ``additionalProperties``.

    Args:
        args: The arguments as the model sent them.
        schema: The tool's parameter schema (``properties``, ``required``).

    Returns:
        ``(coerced, None)`` when everything fits, else ``(partially coerced, error)``
        where ``error`` lists every problem and the expected parameters.
    """
    if not isinstance(args, Mapping):
        return {}, f"the arguments must be a JSON object, not {json_type_name(args)}"
    if not isinstance(schema, Mapping):
        schema = {}
    raw_props = schema.get("properties")
    props: Mapping[str, Any] = raw_props if isinstance(raw_props, Mapping) else {}
    raw_required = schema.get("required")
    required = (
        [r for r in raw_required if isinstance(r, str)]
        if isinstance(raw_required, list | tuple)
        else []
    )
    additional = schema.get("additionalProperties", False)
    extras_allowed = additional is True or isinstance(additional, Mapping)

    coerced: dict[str, Any] = {}
    extra: list[str] = []
    problems: list[str] = []
    invalid: set[str] = set()
    for raw_key, value in args.items():
        key = str(raw_key)
        if value is None:
            continue  # null carries no information: same as not sending the argument
        if key not in props:
            if extras_allowed:
                coerced[key] = value
            else:
                extra.append(key)
            continue
        ok, new_value, why = _coerce_value(value, props[key])
        if ok:
            coerced[key] = new_value
        else:
            invalid.add(key)
            problems.append(f'argument "{preview(key)}" {why}')

    missing = [r for r in required if r not in coerced and r not in invalid]
    parts: list[str] = []
    if missing:
        parts.append("missing required argument(s): " + ", ".join(missing))
    if extra:
        parts.append("unexpected argument(s): " + ", ".join(preview(k) for k in extra))
    parts.extend(problems)
    if not parts:
        return coerced, None
    return coerced, "; ".join(parts) + f". Expected: {describe_params(props, required)}"


def _coerce_value(value: Any, spec: Any) -> tuple[bool, Any, str]:
    """Return ``(ok, coerced, reason_if_not_ok)`` for one value against its sub-schema."""
    if not isinstance(spec, Mapping):
        return True, value, ""
    types = schema_types(spec)
    if not types:
        return _check_enum(value, spec)
    for kind in types:  # a value that already has an allowed type is left alone
        if _has_type(value, kind):
            return _check_enum(_normalise(value, kind), spec)
    for kind in types:
        ok, converted = _convert(value, kind)
        if ok:
            return _check_enum(converted, spec)
    expected = " or ".join(_TYPE_LABELS.get(t, t) for t in types)
    return False, value, f"must be {expected}, got {preview_value(value)}"


def schema_types(spec: Mapping[str, Any]) -> list[str]:
    """The JSON types a sub-schema allows (``type``, or the options of ``anyOf``/``oneOf``)."""
    raw = spec.get("type")
    if isinstance(raw, str):
        return [raw]
    if isinstance(raw, list | tuple):
        return [t for t in raw if isinstance(t, str)]
    # Optional[...] from pydantic comes out as anyOf: [{"type": X}, {"type": "null"}].
    types: list[str] = []
    for key in ("anyOf", "oneOf"):
        options = spec.get(key)
        if isinstance(options, list | tuple):
            for option in options:
                if isinstance(option, Mapping):
                    types.extend(schema_types(option))
    return types


def _has_type(value: Any, kind: str) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return (
            isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        )
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "object":
        return isinstance(value, Mapping)
    if kind == "array":
        return isinstance(value, list | tuple)
    if kind == "null":
        return value is None
    return True  # unknown type names are not ours to police


def _normalise(value: Any, kind: str) -> Any:
    if kind == "object" and not isinstance(value, dict):
        return dict(value)
    if kind == "array" and isinstance(value, tuple):
        return list(value)
    return value


def _convert(value: Any, kind: str) -> tuple[bool, Any]:
    try:
        if kind == "string":
            if isinstance(value, bool | int | float):
                return True, json.dumps(value)
            if isinstance(value, Mapping | list | tuple):
                return True, compact_json(value)
        elif kind == "integer":
            if isinstance(value, str):
                text = value.strip()
                if _INT_TEXT.fullmatch(text):
                    return True, int(text)
                if _NUMBER_TEXT.fullmatch(text):
                    number = float(text)
                    if math.isfinite(number) and number.is_integer():
                        return True, int(number)
            elif isinstance(value, float) and math.isfinite(value) and value.is_integer():
                return True, int(value)
        elif kind == "number":
            if isinstance(value, str):
                text = value.strip()
                if _INT_TEXT.fullmatch(text):
                    return True, int(text)
                if _NUMBER_TEXT.fullmatch(text):
                    number = float(text)
                    if math.isfinite(number):
                        return True, number
        elif kind == "boolean":
            if isinstance(value, str) and value.strip().lower() in ("true", "false"):
                return True, value.strip().lower() == "true"
        elif kind in ("object", "array") and isinstance(value, str):
            decoded = json.loads(value)
            if kind == "object" and isinstance(decoded, dict):
                return True, decoded
            if kind == "array" and isinstance(decoded, list):
                return True, decoded
    except (ValueError, TypeError, RecursionError, OverflowError):
        # int() refuses > 4300 digits, json.dumps refuses odd objects and deep nesting.
        pass
    return False, value


def _check_enum(value: Any, spec: Mapping[str, Any]) -> tuple[bool, Any, str]:
    options = spec.get("enum")
    if isinstance(options, list | tuple) and options:
        try:
            allowed = value in options
        except Exception:  # noqa: BLE001 - exotic __eq__ must not crash the parser
            allowed = False
        if not allowed:
            listed = ", ".join(preview_value(o) for o in options[:10])
            return False, value, f"must be one of {listed}, got {preview_value(value)}"
    return True, value, ""


def describe_params(props: Mapping[str, Any], required: Sequence[str]) -> str:
    """The parameters as the model is told them: ``key (string, required), ...``."""
    if not props:
        return "no arguments"
    described = []
    for name, spec in props.items():
        types = schema_types(spec) if isinstance(spec, Mapping) else []
        kind = "/".join(types) if types else "any"
        flag = "required" if name in required else "optional"
        described.append(f"{name} ({kind}, {flag})")
    return ", ".join(described)
