r"""Model output made storable: what msgpack and the database cannot keep, kept as text.

A model's answer lands in checkpointed state (the AIMessage, parsed tool calls), and
LangGraph's checkpoint serializer (msgpack) cannot hold an integer beyond 64 bits, a
string with a lone surrogate, or unbounded nesting. One such value in a tool call's
arguments (`{"n": 1e400}` written as a 401-digit integer) made every checkpoint write
fail, and `resume` failed the same way: the run was wedged for good. Such values are
converted at the boundary, losslessly, to text (the integer's digits, `nan`, the
surrogate as a `\udXXX` escape), and callers flag that it happened.
"""

from __future__ import annotations

import json
import math
from typing import Any

MAX_DEPTH = 64
"""Nesting kept as structure; deeper subtrees are kept as their JSON text."""


class _Raw(str):
    """Text already in JSON form (a bracket, a comma, a key)."""


def _json_text(value: Any) -> str:
    """`value` as JSON text, without recursion (it may be nested 10,000 deep)."""
    out: list[str] = []
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, _Raw):
            out.append(item)
        elif isinstance(item, list | tuple):
            out.append("[")
            stack.append(_Raw("]"))
            for i in range(len(item) - 1, -1, -1):
                stack.append(item[i])
                if i:
                    stack.append(_Raw(","))
        elif isinstance(item, dict):
            out.append("{")
            stack.append(_Raw("}"))
            pairs = list(item.items())
            for i in range(len(pairs) - 1, -1, -1):
                key, child = pairs[i]
                stack.append(child)
                stack.append(_Raw(json.dumps(storable(str(key))[0]) + ":"))
                if i:
                    stack.append(_Raw(","))
        else:
            out.append(json.dumps(storable(item)[0], ensure_ascii=False))
    return "".join(out)


def storable(value: Any, depth: int = 0) -> tuple[Any, bool]:
    """`value` with every unstorable part as text, and whether anything was converted."""
    if value is None or isinstance(value, bool):
        return value, False
    if isinstance(value, int):
        return (value, False) if -(2**63) <= value < 2**64 else (str(value), True)
    if isinstance(value, float):
        return (value, False) if math.isfinite(value) else (repr(value), True)
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value.encode("utf-8", "backslashreplace").decode("utf-8"), True
        return value, False
    if depth >= MAX_DEPTH and isinstance(value, dict | list | tuple):
        return _json_text(value), True
    changed = False
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            k, k_changed = storable(str(key), depth + 1)
            v, v_changed = storable(item, depth + 1)
            out[k] = v
            changed = changed or k_changed or v_changed
        return out, changed
    if isinstance(value, list | tuple):
        items = []
        for item in value:
            v, v_changed = storable(item, depth + 1)
            items.append(v)
            changed = changed or v_changed
        return items, changed
    return str(value), True
