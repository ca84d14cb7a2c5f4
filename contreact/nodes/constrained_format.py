"""Constrained tool mode: the JSON schema Ollama's `format` holds each answer to.

Small models that cannot make tool calls (Gemma 3 270M, SmolLM2-135M) wrote none in
text-tool mode: they answer in prose until `num_predict` cuts them off. Ollama turns a
JSON schema in `format` into a grammar on the sampler, so the only thing such a model can
write is what the schema admits. With `tools: {mode: constrained}` that is exactly one
call of an offered tool, `{"name": <the tool's name>, "arguments": <its parameters>}`,
or the final answer: the reflection object itself when the run asks for structured
reflections (`reflection: {format: json}`), else LangChain's JSON-agent finish
`{"action": "Final Answer", "action_input": "<the note>"}`. The parser's JSON layer reads
both shapes as they are (a call; a final answer, unwrapped). Once the cycle's budget
withdraws the tools, only the final answer is admitted.

The branches are built from the tool schemas the registry (and langchain-core, for tools
of your own) already makes: each tool's `parameters`, closed to other keys. Pure.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from contreact.text.reflection_format import shown_schema

FINAL_ACTION = "Final Answer"
"""The `action` of a free-text final answer (the parser's JSON layer knows it)."""

EXAMPLE_CALL = json.dumps(
    {"name": "write", "arguments": {"key": "first-note", "value": "what I want to remember"}}
)
"""A call written as the schema admits it, for the prompt."""

FINAL_TEXT = {
    "type": "object",
    "properties": {
        "action": {"const": FINAL_ACTION},
        "action_input": {"type": "string"},
    },
    "required": ["action", "action_input"],
    "additionalProperties": False,
}
"""The final answer when reflections are free text: the note is `action_input`."""


def call_branch(tool: Mapping[str, Any]) -> dict[str, Any]:
    """What one call of `tool` (an Ollama/OpenAI function schema) may look like.

    The arguments are the tool's own parameter schema, with keys it does not list
    refused unless it says otherwise.
    """
    function = tool["function"]
    arguments = dict(function.get("parameters") or {"type": "object", "properties": {}})
    arguments.setdefault("additionalProperties", False)
    return {
        "type": "object",
        "properties": {"name": {"const": function["name"]}, "arguments": arguments},
        "required": ["name", "arguments"],
        "additionalProperties": False,
    }


def final_branch(reflection_schema: Mapping[str, Any] | None) -> dict[str, Any]:
    """What the final answer may look like: the reflection schema, or `FINAL_TEXT`."""
    if reflection_schema is None:
        return dict(FINAL_TEXT)
    return shown_schema(reflection_schema)


def answer_schema(
    tool_schemas: Sequence[Mapping[str, Any]],
    reflection_schema: Mapping[str, Any] | None,
    *,
    tools: bool,
) -> dict[str, Any]:
    """The `format` of one model call in constrained mode.

    Args:
        tool_schemas: The run's tools, as `bind_tools` takes them.
        reflection_schema: The run's reflection schema; None for free-text reflections.
        tools: Whether this call may use tools (False once the cycle's budget is spent).

    Returns:
        `{"anyOf": [one branch per tool..., the final answer]}`, or the final answer's
        schema alone when `tools` is False or there are no tools.
    """
    final = final_branch(reflection_schema)
    if not tools or not tool_schemas:
        return final
    return {"anyOf": [*(call_branch(t) for t in tool_schemas), final]}
