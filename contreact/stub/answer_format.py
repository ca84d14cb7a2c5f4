"""Scripted answers in the shape a request's `format` (a JSON schema) asks for.

Ollama holds a model to `format` with a grammar on its sampler. The stub's scripted
agents have no sampler, so their answer is reshaped the way a grammar would have forced
it, for contreact's constrained tool mode: a tool call becomes the bare JSON call of the
schema's branch naming that tool (`{"name": ..., "arguments": ...}`), and a text answer
fills the branch that is not a call (a reflection object, or `{"action": "Final Answer",
"action_input": ...}`). An answer that is JSON already is left as the script wrote it,
so a test can script constrained output, right or wrong. The real backend
(`stub.real`) applies the schema as Ollama does instead.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from contreact.stub.ollama_api import Reply, format_branches, format_tool_names


def fill_fields(schema: Mapping[str, Any], note: str, cycle: int) -> dict[str, Any]:
    """A JSON object with every field of `schema`, made from a text answer.

    A `const` or `enum` field gets its (first) value; the only text field gets the whole
    note; of several, the plan-like ones (named `plan...` or `next...`) get the note's
    plan sentences and the others the rest; other types get a sample of their type.
    """
    sentences = re.split(r"(?<=[.!?])\s+", note)
    planned = [s for s in sentences if s.startswith(("Next", "My plan"))] or sentences[-1:]
    told = " ".join(s for s in sentences if s not in planned) or note
    samples: dict[str, Any] = {
        "integer": cycle,
        "number": float(cycle),
        "boolean": True,
        "array": sentences,
        "object": {"cycle": cycle},
    }
    properties = schema.get("properties")
    specs = {
        str(k): v if isinstance(v, dict) else {}
        for k, v in (properties if isinstance(properties, Mapping) else {}).items()
    }
    texts = [n for n, s in specs.items() if _kind(s) == "string" and "const" not in s]
    fields: dict[str, Any] = {}
    for name, spec in specs.items():
        kind = _kind(spec)
        if "const" in spec:
            fields[name] = spec["const"]
        elif isinstance(spec.get("enum"), list) and spec["enum"]:
            fields[name] = spec["enum"][0]
        elif kind == "string" and len(texts) == 1:
            fields[name] = note
        elif kind == "string":
            plan_like = name.lower().startswith(("plan", "next"))
            fields[name] = " ".join(planned) if plan_like else told
        else:
            fields[name] = samples.get(str(kind))
    return fields


def _kind(spec: Mapping[str, Any]) -> Any:
    kind = spec.get("type", "string")
    return kind[0] if isinstance(kind, list) and kind else kind


def shaped(reply: Reply, answer_format: Any, cycle: int) -> Reply:
    """`reply` as the JSON schema `answer_format` admits it (unchanged without a schema).

    One call at most (a grammar admits one); a call of a tool the schema does not name
    is answered with the reply's text instead, as a model held to the final answer would.
    """
    if not isinstance(answer_format, Mapping):
        return reply
    names = format_tool_names(answer_format)
    admitted = [c for c in reply.tool_calls if c["name"] in names]
    if admitted:
        call = {"name": admitted[0]["name"], "arguments": admitted[0]["arguments"]}
        return Reply(
            content=json.dumps(call, ensure_ascii=False),
            thinking=reply.thinking,
            done_reason=reply.done_reason,
        )
    content = reply.content or f"Tools withdrawn; closing cycle {cycle}."
    try:
        json.loads(content)
    except ValueError:
        final = next((b for b in format_branches(answer_format) if not format_tool_names(b)), None)
        if final is not None:
            content = json.dumps(fill_fields(final, content, cycle), ensure_ascii=False)
    return Reply(content=content, thinking=reply.thinking, done_reason=reply.done_reason)
