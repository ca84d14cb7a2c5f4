"""Python-call syntax for tool calls: ``[write(key='a', value='b')]`` and friends.

Llama 3.2 / 4 (vLLM's ``pythonic`` parser), LFM2 (``<|tool_call_start|>[...]``), Llama 4's
``<|python_start|>``, Llama 3.1's built-in ``<|python_tag|>tool.call(...)`` and Gemma's
```` ```tool_code ```` blocks write calls as Python expressions. They are read with
:mod:`ast` (parsing only, nothing is evaluated but literals) from bounded candidate
spans: a ``[`` at a line start followed by ``name(``, a token-delimited span, a
``tool_code`` fence, or a whole message that is one call to a known tool.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from typing import Any

from contreact.text.toolcalls.calls import Attempt, broken, build_call, known
from contreact.text.toolcalls.outcomes import ParsedCall, ToolSchemas

Span = tuple[int, int, list[Attempt]]

_MAX_CANDIDATES = 32  # bracket scans per message: keeps the layer linear in the text
_LIST_START = re.compile(r"^[ \t]*(\[)[ \t]*[^\W\d][\w.]*\(", re.MULTILINE)
_TOKEN_SPANS = (
    ("<|python_start|>", "<|python_end|>"),
    ("<|tool_call_start|>", "<|tool_call_end|>"),
)
_PYTHON_TAG = "<|python_tag|>"
_PYTHON_TAG_END = re.compile(r"<\|(?:eom_id|eot_id|python_end)\|>")
_CODE_FENCE = re.compile(r"^[ \t]*```(?:tool_code|tool_call|tool_calls)[ \t]*\r?\n", re.M)
_CALL_HEAD = re.compile(r"[^\W\d][\w.]*\(")
_JSON_LITERALS = {"true": True, "false": False, "null": None}


def read_pythonic(text: str, schemas: ToolSchemas) -> list[Span]:
    """Every pythonic call span in ``text`` (possibly overlapping; the caller resolves)."""
    spans: list[Span] = []
    for opening, closing in _TOKEN_SPANS:
        spans.extend(_token_spans(text, opening, closing, schemas))
    spans.extend(_python_tag_spans(text, schemas))
    spans.extend(_fenced_spans(text, schemas))
    spans.extend(_list_spans(text, schemas))
    whole = _whole_message(text, schemas)
    if whole is not None:
        spans.append(whole)
    return spans


def _token_spans(text: str, opening: str, closing: str, schemas: ToolSchemas) -> list[Span]:
    spans: list[Span] = []
    pos = text.find(opening)
    while pos >= 0 and len(spans) < _MAX_CANDIDATES:
        body_start = pos + len(opening)
        end_at = text.find(closing, body_start)
        body_end = end_at if end_at >= 0 else len(text)
        end = end_at + len(closing) if end_at >= 0 else len(text)
        calls = _calls_in_source(text[body_start:body_end], pos, schemas, strict=False)
        if calls:
            spans.append((pos, end, calls))
        pos = text.find(opening, end)
    return spans


def _python_tag_spans(text: str, schemas: ToolSchemas) -> list[Span]:
    pos = text.find(_PYTHON_TAG)
    if pos < 0:
        return []
    body_start = pos + len(_PYTHON_TAG)
    body = text[body_start:].lstrip()
    if body[:1] in ("{", "["):
        return []  # JSON after the tag: the JSON layer's
    stop = _PYTHON_TAG_END.search(text, body_start)
    end = stop.start() if stop else len(text)
    calls = _calls_in_source(text[body_start:end], pos, schemas, strict=False)
    return [(pos, stop.end() if stop else end, calls)] if calls else []


def _fenced_spans(text: str, schemas: ToolSchemas) -> list[Span]:
    spans: list[Span] = []
    for fence in _CODE_FENCE.finditer(text):
        if len(spans) >= _MAX_CANDIDATES:
            break
        close = text.find("```", fence.end())
        body_end = close if close >= 0 else len(text)
        end = close + 3 if close >= 0 else len(text)
        body = text[fence.end() : body_end]
        if body.lstrip()[:1] in ("{", "["):
            continue  # JSON in the fence: the JSON layer's
        calls = _calls_in_source(body, fence.start(), schemas, strict=False)
        if calls:
            spans.append((fence.start(), end, calls))
    return spans


def _list_spans(text: str, schemas: ToolSchemas) -> list[Span]:
    spans: list[Span] = []
    searched_to = 0
    for count, match in enumerate(_LIST_START.finditer(text)):
        start = match.start(1)
        if count >= _MAX_CANDIDATES:
            break
        if start < searched_to:
            continue
        end = _balanced_end(text, start)
        if end < 0:
            break  # unbalanced to the end of the text: no later list can close either
        searched_to = end
        calls = _calls_in_source(text[start:end], start, schemas, strict=True)
        # A guessed span counts when it names a real tool or is the whole message, so
        # prose like "[see(1)]" stays prose.
        whole = not text[:start].strip() and not text[end:].strip()
        if calls and (whole or any(known(a.call.name, schemas) for a in calls)):
            spans.append((start, end, calls))
    return spans


def _whole_message(text: str, schemas: ToolSchemas) -> Span | None:
    """A message that is nothing but ``tool(...)`` calls of known tools (Gemma, bare)."""
    stripped = text.strip()
    if not stripped.endswith(")") or len(stripped) > 100_000 or not _CALL_HEAD.match(stripped):
        return None
    calls = _calls_in_source(stripped, 0, schemas, strict=True)
    if not calls or not all(a.parsed and known(a.call.name, schemas) for a in calls):
        return None
    return (0, len(text), calls)


def _balanced_end(text: str, start: int) -> int:
    """Index after the bracket matching ``text[start]``, or -1 (quotes respected)."""
    depth = 0
    quote = ""
    index = start
    size = len(text)
    while index < size:
        char = text[index]
        if quote:
            if char == "\\":
                index += 2
                continue
            if char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
            if depth == 0:
                return index + 1
        index += 1
    return -1


def _calls_in_source(source: str, pos: int, schemas: ToolSchemas, *, strict: bool) -> list[Attempt]:
    """Calls in a Python expression (a call or a list of calls) or statements of calls.

    ``strict``: the span was only guessed (a ``[`` at a line start), so anything but a
    clean list of calls with literal arguments means "not a call" rather than "broken".
    """
    code = source.strip()
    if not code:
        return []
    try:
        tree = ast.parse(code, mode="exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError, TypeError):
        return [] if strict else [broken(pos, "", "the Python-style call does not parse")]
    nodes: list[ast.expr] = []
    for statement in tree.body:
        if not isinstance(statement, ast.Expr):
            return [] if strict else [broken(pos, "", "the code is not a tool call")]
        value = statement.value
        nodes.extend(value.elts if isinstance(value, ast.List | ast.Tuple) else [value])
    attempts: list[Attempt] = []
    for node in nodes:
        attempt = _call_from_node(node, pos, schemas)
        if attempt is None:
            return [] if strict else [broken(pos, "", "the code is not a tool call")]
        attempts.append(attempt)
    return attempts


def _call_from_node(node: ast.expr, pos: int, schemas: ToolSchemas) -> Attempt | None:
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "print"
        and len(node.args) == 1
        and isinstance(node.args[0], ast.Call)
    ):
        node = node.args[0]  # Gemma: print(default_api.write(...))
    if not isinstance(node, ast.Call):
        return None
    name = _dotted(node.func)
    if name is None:
        return None
    if name.endswith(".call") and not known(name, schemas):
        name = name[: -len(".call")]  # Llama 3.1 built-ins: brave_search.call(query=...)
    args: dict[str, Any] = {}
    for keyword in node.keywords:
        if keyword.arg is None:
            return None  # **kwargs
        ok, value = _literal(keyword.value)
        if not ok:
            return None
        args[keyword.arg] = value
    if node.args:
        positional: list[Any] = []
        for arg in node.args:
            ok, value = _literal(arg)
            if not ok:
                return None
            positional.append(value)
        return Attempt(pos, _with_positional(name, positional, args, schemas), parsed=True)
    return Attempt(pos, build_call(name, args, schemas), parsed=True)


def _with_positional(
    name: str, positional: list[Any], args: dict[str, Any], schemas: ToolSchemas
) -> ParsedCall:
    tool = name if name in schemas else name.rsplit(".", 1)[-1]
    schema = schemas.get(tool)
    props = schema.get("properties") if isinstance(schema, Mapping) else None
    params = [str(p) for p in props] if isinstance(props, Mapping) else []
    if len(positional) > len(params):
        return build_call(name, {**args, "input": positional}, schemas)
    for param, value in zip(params, positional, strict=False):
        args.setdefault(param, value)
    return build_call(name, args, schemas)


def _dotted(node: ast.expr) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def _literal(node: ast.expr) -> tuple[bool, Any]:
    if isinstance(node, ast.Name) and node.id in _JSON_LITERALS:
        return True, _JSON_LITERALS[node.id]
    try:
        return True, ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        return False, None
