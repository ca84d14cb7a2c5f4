"""Layer 2: tool calls written as JSON objects in the message text.

Bare, fenced, in lists, several per message, wrapped in other JSON or in a family's
tokens (Mistral ``[TOOL_CALLS][...]``, Llama ``<|python_tag|>``, Granite
``<|tool_call|>``, Command R7B ``<|START_ACTION|>``, Nemotron ``<TOOLCALL>``, Jamba and
MiniMax ``<tool_calls>``, Phi-4 ``functools[...]``, InternLM ``<|plugin|>``): JSON is found
with :meth:`json.JSONDecoder.raw_decode` at every candidate ``{``, never with a greedy
regular expression, and read with the key pairs the families use (``name``/``arguments``,
``tool_name``/``parameters``, LangChain's ``action``/``action_input``, ...).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Mapping, Sequence
from typing import Any

from contreact.text.toolcalls.calls import Attempt, broken, build_call, call_from_input, known
from contreact.text.toolcalls.outcomes import ToolSchemas
from contreact.text.toolcalls.text import DECODER, json_error

MAX_NESTED_SEARCH = 8  # how deep to look for call objects wrapped in other JSON
FINAL_ACTIONS = frozenset({"final answer", "final_answer", "finalanswer", "finish"})
"""LangChain JSON agents finish with ``{"action": "Final Answer", "action_input": ...}``."""

_OPENS_OBJECT = re.compile(r"""\{\s*["'}]""")
"""What can start a JSON object (or a single-quoted attempt at one, reported as broken)."""
_NAME_ATTEMPT = re.compile(r"""\{\s*["'](?:tool_)?name["']\s*:""")
_NAME_VALUE = re.compile(r"""\{\s*["'](?:tool_)?name["']\s*:\s*["']([^"'\\\r\n]{1,80})["']""")
_ARGS_KEYS = ("arguments", "parameters", "args")
_CALL_ENVELOPE_KEYS = frozenset({"name", "id", "type"})
# Other families' (name key, input keys): Command-R / Cohere {"tool_name", "parameters"},
# LangChain's JSON agents {"action", "action_input"} and {"tool", "tool_input"}.
_ALIASES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("tool_name", ("parameters", "arguments", "args")),
    ("action", ("action_input",)),
    ("tool", ("tool_input", "arguments", "parameters", "args")),
)


def scan_json(text: str, schemas: ToolSchemas, *, in_tag: bool = False) -> list[Attempt]:
    """Find call objects in ``text`` by decoding JSON at every candidate ``{``.

    Args:
        text: Visible text (tool_call blocks masked out) or one tool_call body.
        schemas: The tools on offer.
        in_tag: The text is a ``<tool_call>`` body: any object in it is a call attempt.

    Returns:
        The calls and the unparsable attempts, in text order.
    """
    found: list[Attempt] = []
    code = [] if in_tag else code_blocks(text)
    pos = 0
    while True:
        start = text.find("{", pos)
        if start < 0:
            return found
        if not _OPENS_OBJECT.match(text, start):
            # Decoding would fail at once, and its error would count the lines up to here:
            # `{` after `{` (a runaway answer) made the scan quadratic.
            pos = start + 1
            continue
        try:
            value, end = DECODER.raw_decode(text, start)
        except (ValueError, RecursionError) as exc:
            if _NAME_ATTEMPT.match(text, start) and not inside(start, code):
                name_match = _NAME_VALUE.match(text, start)
                name = name_match.group(1).strip() if name_match else ""
                found.append(broken(start, name, f"invalid JSON: {json_error(exc)}"))
            # Not JSON here: an inner "{" may still start a valid object.
            pos = start + 1
            continue
        calls = _calls_in_value(value, schemas, start, depth=0, top=True, loose=in_tag)
        if not calls and in_tag:
            calls = [broken(start, "", "the JSON object has no tool name")]
        found.extend(calls)
        pos = end


_FENCE_LINE = re.compile(r"^[ \t]*```([^\r\n`]*)", re.MULTILINE)
_JSON_FENCES = frozenset({"", "json", "jsonc", "json5", "jsonl", "tool_call", "tool_code"})


def code_blocks(text: str) -> list[tuple[int, int]]:
    """Spans of fenced code blocks in a language other than JSON (ascending).

    ``{"name": x, ...}`` in a Python snippet of a reflection is code, not a broken call;
    only fragments outside such blocks count as failed call attempts.
    """
    return [(start, end) for start, end, language in _fences(text) if language not in _JSON_FENCES]


def program_blocks(text: str) -> list[tuple[int, int]]:
    """Spans of fenced code in a programming language (```python, ```js, ...).

    Tags and tokens quoted in a program (a reflection's notes on formats) are code, not
    calls; fences in xml, text or no language may hold a model's real call.
    """
    return [(start, end) for start, end, language in _fences(text) if language in _PROGRAMS]


_PROGRAMS = frozenset(
    "python py python3 javascript js typescript ts jsx tsx bash sh shell zsh console go "
    "golang rust rs c cpp c++ h java kotlin swift ruby rb php perl lua r julia haskell sql "
    "csharp cs scala dart elixir clojure".split()
)


def _fences(text: str) -> list[tuple[int, int, str]]:
    """Every fenced block: start, end (the end of the text if unclosed), language."""
    found: list[tuple[int, int, str]] = []
    opening: re.Match[str] | None = None
    for fence in _FENCE_LINE.finditer(text):
        if opening is None:
            opening = fence
            continue
        found.append((opening.start(), fence.end(), _language(opening)))
        opening = None
    if opening is not None:
        found.append((opening.start(), len(text), _language(opening)))
    return found


def _language(fence: re.Match[str]) -> str:
    return fence.group(1).strip().split(" ", 1)[0].lower()


def inside(pos: int, spans: Sequence[tuple[int, int]]) -> bool:
    """Whether ``pos`` lies in one of ``spans`` (sorted, disjoint)."""
    index = bisect.bisect_right(spans, pos, key=lambda span: span[0]) - 1
    return index >= 0 and spans[index][0] <= pos < spans[index][1]


def _calls_in_value(
    value: Any, schemas: ToolSchemas, pos: int, *, depth: int, top: bool, loose: bool
) -> list[Attempt]:
    """Collect call objects in a decoded JSON value, looking inside wrappers.

    ``depth`` grows with every container (lists too), so arbitrarily nested model
    output cannot exhaust the interpreter's recursion limit.
    """
    if depth > MAX_NESTED_SEARCH:
        return []
    if isinstance(value, dict):
        direct = _call_from_dict(value, schemas, pos, top=top, loose=loose)
        if direct is not None:
            return [direct]
        found: list[Attempt] = []
        for item in value.values():
            found.extend(
                _calls_in_value(item, schemas, pos, depth=depth + 1, top=False, loose=False)
            )
        return found
    if isinstance(value, list):
        found = []
        for item in value:
            # A top-level list of calls ([{...}, {...}]) is as direct as a single object.
            found.extend(_calls_in_value(item, schemas, pos, depth=depth + 1, top=top, loose=loose))
        return found
    return []


def _call_from_dict(
    obj: dict[str, Any], schemas: ToolSchemas, pos: int, *, top: bool, loose: bool
) -> Attempt | None:
    """Read one dict as a call, or return None when it is not shaped like one.

    Accepted shapes: ``{"name", "arguments"|"parameters"|"args"}``; the OpenAI wrapper
    ``{"function": {...}}``; ``{"function": "<name>", "arguments": ...}``; and, at the
    top level or inside a tag, ``{"name": <known tool>, <flattened arguments>}``.
    """
    function = obj.get("function")
    if isinstance(function, dict) and "name" not in obj:
        return _call_from_dict(function, schemas, pos, top=True, loose=True)
    args_key = next((k for k in _ARGS_KEYS if k in obj), None)
    name: Any = obj.get("name")
    if "name" not in obj and isinstance(function, str) and args_key:
        name = function
    elif "name" not in obj:
        return _aliased_call(obj, schemas, pos, top=top, loose=loose)
    if args_key is not None:
        raw_args = obj[args_key]
        if "description" in obj and isinstance(raw_args, Mapping) and "properties" in raw_args:
            # The model echoed a tool *definition*; it meant to do something with it.
            return broken(pos, str(name), "that is a tool definition, not a tool call")
        return Attempt(pos, build_call(name, raw_args, schemas), parsed=True)
    if isinstance(name, str) and (top or loose) and known(name, schemas):
        flattened = {k: v for k, v in obj.items() if k not in _CALL_ENVELOPE_KEYS}
        return Attempt(pos, build_call(name, flattened, schemas), parsed=True)
    if loose:
        return Attempt(pos, build_call(name, None, schemas), parsed=True)
    return None  # e.g. {"name": "Alice", "age": 3}: plain data, not a call


def _aliased_call(
    obj: dict[str, Any], schemas: ToolSchemas, pos: int, *, top: bool, loose: bool
) -> Attempt | None:
    """Read the other families' key pairs, and Apertus' ``{"<tool>": {arguments}}``."""
    for name_key, input_keys in _ALIASES:
        name = obj.get(name_key)
        input_key = next((k for k in input_keys if k in obj), None)
        # {"tool_name": ...} alone is a call only where a call is expected (top level, in
        # a tag), not as data nested in other JSON.
        bare_ok = name_key == "tool_name" and (top or loose)
        if not isinstance(name, str) or (input_key is None and not bare_ok):
            continue
        if name_key == "action" and name.strip().lower() in FINAL_ACTIONS:
            return None  # the agent's final answer, not a call
        raw = obj.get(input_key) if input_key else None
        if isinstance(raw, str):
            return call_from_input(pos, name, raw, schemas)
        return Attempt(pos, build_call(name, raw, schemas), parsed=True)
    if (top or loose) and len(obj) == 1:
        ((key, value),) = obj.items()
        if isinstance(value, dict) and known(str(key), schemas):
            return Attempt(pos, build_call(key, value, schemas), parsed=True)
    return None


def final_action_input(text: str) -> str | None:
    """The answer of a LangChain JSON agent's ``{"action": "Final Answer", ...}``, if any."""
    start = text.find("{")
    if start < 0:
        return None
    try:
        value, _end = DECODER.raw_decode(text, start)
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, dict):
        return None
    action = value.get("action")
    answer = value.get("action_input")
    if isinstance(action, str) and action.strip().lower() in FINAL_ACTIONS:
        if isinstance(answer, str) and answer.strip():
            return answer.strip()
    return None
