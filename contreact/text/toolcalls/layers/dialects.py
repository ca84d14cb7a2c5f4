"""The dialect layer: model families whose markup separates the tool name from its JSON.

In these formats no JSON object carries the tool's name, so the JSON layer cannot see
them: Mistral v11+ ``[TOOL_CALLS]name[ARGS]{...}``, DeepSeek V3 / R1 / V3.1
``<｜tool▁call▁begin｜>...<｜tool▁sep｜>...``, Kimi K2 ``<|tool_call_begin|>functions.name:0
<|tool_call_argument_begin|>{...}``, Functionary v3.1 ``<function=name>{...}</function>``
(and Qwen3-Coder / Seed-OSS function tags outside ``<tool_call>``), Functionary v3.2
``>>>name`` + a JSON line, ``<invoke name=...><parameter name=...>`` (MiniMax-M2, DeepSeek V3.2
DSML), LangChain's XML agent ``<tool>name</tool><tool_input>...``, FunctionGemma and
Gemma 4 ``call:NAME{k:<escape>v<escape>}``, and the Python-call
syntax (:mod:`nodes.toolcalls.layers.pythonic`). gpt-oss harmony is unwrapped before
any layer runs (:mod:`nodes.toolcalls.layers.harmony`).

Each reader returns spans ``(start, end, attempts)`` of the visible text; overlapping
spans are resolved earliest-first, and the spans are masked out of the text the JSON and
ReAct layers read, so no call is read twice.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from typing import Any

from contreact.text.toolcalls.calls import Attempt, broken, build_call, call_from_input, known
from contreact.text.toolcalls.layers.pythonic import Span, read_pythonic
from contreact.text.toolcalls.layers.tags import function_tag_calls
from contreact.text.toolcalls.outcomes import ToolSchemas
from contreact.text.toolcalls.text import DECODER, json_error, preview, strip_fences

_NAME = re.compile(r"[ \t]*([^\W\d][\w.\-]*)")
_MAX_SPANS = 256


def dialect_spans(text: str, schemas: ToolSchemas) -> list[Span]:
    """Every dialect call span in ``text``, sorted, overlaps resolved (earliest first)."""
    readers: tuple[Callable[[str, ToolSchemas], list[Span]], ...] = (
        _mistral,
        _deepseek,
        _kimi,
        _function_tags,
        _functionary_v32,
        _invoke,
        _langchain_xml,
        _call_colon,
        read_pythonic,
    )
    spans: list[Span] = []
    for reader in readers:
        spans.extend(reader(text, schemas)[:_MAX_SPANS])
    spans.sort(key=lambda span: (span[0], -span[1]))
    kept: list[Span] = []
    for span in spans:
        if kept and span[0] < kept[-1][1]:
            continue
        kept.append(span)
    return kept


def json_call(pos: int, name: str, text: str, schemas: ToolSchemas) -> Attempt:
    """A call whose arguments are the (possibly fenced) JSON object in ``text``."""
    body = strip_fences(text).strip()
    if not body:
        return Attempt(pos, build_call(name, {}, schemas), parsed=True)
    start = body.find("{")
    if start < 0:
        return call_from_input(pos, name, body, schemas)
    try:
        value, _end = DECODER.raw_decode(body, start)
    except (ValueError, RecursionError) as exc:
        detail = f"the arguments of {preview(name, 40)} are not JSON: {json_error(exc)}"
        return broken(pos, name, detail)
    return Attempt(pos, build_call(name, value, schemas), parsed=True)


# --------------------------------------------------------------------------- Mistral v11

_TOOL_CALLS = re.compile(r"\[TOOL_CALLS\]")
_CALL_ID = re.compile(r"[ \t]*\[CALL_ID\][ \t]*[\w\-]*")
_ARGS = re.compile(r"[ \t]*\[ARGS\]")


def _mistral(text: str, schemas: ToolSchemas) -> list[Span]:
    """Read ``[TOOL_CALLS]name[ARGS]{...}`` (v11+) and ``[TOOL_CALLS]name{...}``.

    ``[CALL_ID]id`` may stand between; ``[TOOL_CALLS][{...}]`` (older) is the JSON layer's.
    """
    spans: list[Span] = []
    for token in _TOOL_CALLS.finditer(text):
        name = _NAME.match(text, token.end())
        if not name:
            continue  # "[TOOL_CALLS] [{...}]": a JSON list
        pos = name.end()
        for marker in (_CALL_ID, _ARGS):
            found = marker.match(text, pos)
            if found:
                pos = found.end()
        start = pos
        while start < len(text) and text[start] in " \t\r\n":
            start += 1
        following = _TOOL_CALLS.search(text, start)
        limit = following.start() if following else len(text)
        if text[start : start + 1] != "{" and start < limit:
            detail = "[TOOL_CALLS] is not followed by name[ARGS]{...}"
            spans.append((token.start(), limit, [broken(token.start(), "", detail)]))
            continue
        if text[start : start + 1] != "{":
            spans.append(
                (token.start(), limit, [json_call(token.start(), name.group(1), "", schemas)])
            )
            continue
        try:
            value, end = DECODER.raw_decode(text, start)
        except (ValueError, RecursionError) as exc:
            attempt = broken(
                token.start(), name.group(1), f"invalid JSON arguments: {json_error(exc)}"
            )
            spans.append((token.start(), limit, [attempt]))
            continue
        call = build_call(name.group(1), value, schemas)
        spans.append((token.start(), end, [Attempt(token.start(), call, parsed=True)]))
    return spans


# --------------------------------------------------------------------------- DeepSeek

# DeepSeek's tokens use fullwidth bars and "▁"; some conversions print the bars as ASCII
# "|". The "▁" is required: Kimi's tokens are <|tool_call_begin|> with "_".
_DS_CALL_BEGIN = re.compile(r"<[｜|]tool▁call▁begin[｜|]>")
_DS_CALL_END = re.compile(r"<[｜|]tool▁calls?▁end[｜|]>")
_DS_SEP = re.compile(r"<[｜|]tool▁sep[｜|]>")


def _deepseek(text: str, schemas: ToolSchemas) -> list[Span]:
    """V3 / R1: ``function<sep>NAME``, then fenced JSON; V3.1: ``NAME<sep>{...}``."""
    spans: list[Span] = []
    begins = list(_DS_CALL_BEGIN.finditer(text))
    for index, begin in enumerate(begins):
        limit = begins[index + 1].start() if index + 1 < len(begins) else len(text)
        close = _DS_CALL_END.search(text, begin.end(), limit)
        body_end = close.start() if close else limit
        end = close.end() if close else limit
        sep = _DS_SEP.search(text, begin.end(), body_end)
        if not sep:
            spans.append(
                (begin.start(), end, [broken(begin.start(), "", "no tool▁sep in the call")])
            )
            continue
        before = text[begin.end() : sep.start()].strip()
        after = text[sep.end() : body_end]
        if before in ("function", ""):
            head, _newline, rest = after.lstrip().partition("\n")
            name, args = head.strip(), rest
        else:
            name, args = before, after
        spans.append((begin.start(), end, [json_call(begin.start(), name, args, schemas)]))
    return spans


# --------------------------------------------------------------------------- Kimi K2

_KIMI_BEGIN = re.compile(r"<\|tool_call_begin\|>")
_KIMI_ARGS = re.compile(r"<\|tool_call_argument_begin\|>")
_KIMI_END = re.compile(r"<\|tool_call_end\|>")
_KIMI_ID = re.compile(r"(?:functions\.)?([^\W\d][\w.\-]*?)(?::\d+)?")


def _kimi(text: str, schemas: ToolSchemas) -> list[Span]:
    """``<|tool_call_begin|>functions.NAME:IDX<|tool_call_argument_begin|>{...}``."""
    spans: list[Span] = []
    begins = list(_KIMI_BEGIN.finditer(text))
    for index, begin in enumerate(begins):
        limit = begins[index + 1].start() if index + 1 < len(begins) else len(text)
        close = _KIMI_END.search(text, begin.end(), limit)
        body_end = close.start() if close else limit
        end = close.end() if close else limit
        args = _KIMI_ARGS.search(text, begin.end(), body_end)
        ident = text[begin.end() : args.start() if args else body_end].strip()
        name = _KIMI_ID.fullmatch(ident)
        if not args or not name:
            detail = f"unreadable Kimi tool call id {preview(ident, 40)!r}"
            spans.append((begin.start(), end, [broken(begin.start(), ident, detail)]))
            continue
        arguments = text[args.end() : body_end]
        spans.append(
            (begin.start(), end, [json_call(begin.start(), name.group(1), arguments, schemas)])
        )
    return spans


# --------------------------------------------------------------------------- Functionary

_FUNCTION_OPEN = re.compile(r"<function=[^>\s]+\s*>")
_RECIPIENT = re.compile(r"^>>>[ \t]*([^\W\d][\w.\-]*)[ \t]*(?:\r?\n|\Z)", re.MULTILINE)


def _function_tags(text: str, schemas: ToolSchemas) -> list[Span]:
    """Read ``<function=NAME>`` tags outside ``<tool_call>`` blocks.

    ``{json}</function>`` is Functionary v3.1 and Llama 3.1 custom tools;
    ``<parameter=...>`` bodies are Qwen3-Coder and Seed-OSS without the wrapper.
    """
    spans: list[Span] = []
    opens = list(_FUNCTION_OPEN.finditer(text))
    for index, opening in enumerate(opens):
        limit = opens[index + 1].start() if index + 1 < len(opens) else len(text)
        close = text.find("</function>", opening.end(), limit)
        end = close + len("</function>") if close >= 0 else limit
        attempts = function_tag_calls(text[opening.start() : end], schemas)
        spans.append((opening.start(), end, [_shift(a, opening.start()) for a in attempts]))
    return spans


def _functionary_v32(text: str, schemas: ToolSchemas) -> list[Span]:
    """``>>>NAME`` blocks with JSON; ``>>>all`` carries text for the user, not a call."""
    spans: list[Span] = []
    marks = list(_RECIPIENT.finditer(text))
    for index, mark in enumerate(marks):
        limit = marks[index + 1].start() if index + 1 < len(marks) else len(text)
        if mark.group(1) == "all":
            continue
        body = text[mark.end() : limit]
        if body.strip()[:1] not in ("{", "") and not known(mark.group(1), schemas):
            continue  # ">>> x" then output: a Python session quoted in prose
        spans.append((mark.start(), limit, [json_call(mark.start(), mark.group(1), body, schemas)]))
    return spans


# --------------------------------------------------------------------------- invoke

_DSML = r"(?:[｜|]DSML[｜|])?"
# Extra attributes (MiniMax-M2 echoes descriptions into the tags) are skipped.
_INVOKE = re.compile(r"<" + _DSML + r"invoke\s+name=\"([^\"<>]{1,200})\"[^<>]{0,300}>")
_INVOKE_END = re.compile(r"</" + _DSML + r"invoke\s*>")
_PARAM = re.compile(r"<" + _DSML + r"parameter\s+name=\"([^\"<>]{1,200})\"([^<>]{0,300})>")
_NOT_A_STRING = re.compile(r"\bstring=\"false\"")
_PARAM_END = re.compile(r"</" + _DSML + r"parameter\s*>")


def _invoke(text: str, schemas: ToolSchemas) -> list[Span]:
    """Read ``<invoke name="NAME"><parameter name="P">value</parameter></invoke>``.

    MiniMax-M2, DeepSeek V3.2's DSML tokens, Anthropic-style prompts.
    """
    spans: list[Span] = []
    invokes = list(_INVOKE.finditer(text))
    for index, invoke in enumerate(invokes):
        limit = invokes[index + 1].start() if index + 1 < len(invokes) else len(text)
        close = _INVOKE_END.search(text, invoke.end(), limit)
        body_end = close.start() if close else limit
        end = close.end() if close else limit
        params = list(_PARAM.finditer(text, invoke.end(), body_end))
        args: dict[str, Any] = {}
        for p_index, param in enumerate(params):
            stop = params[p_index + 1].start() if p_index + 1 < len(params) else body_end
            value_end = _PARAM_END.search(text, param.end(), stop)
            value = text[param.end() : value_end.start() if value_end else stop].strip()
            typed = _NOT_A_STRING.search(param.group(2))  # DSML: string="false" is JSON
            args[param.group(1)] = _json_or_text(value) if typed else value
        call = build_call(invoke.group(1), args, schemas)
        spans.append((invoke.start(), end, [Attempt(invoke.start(), call, parsed=True)]))
    return spans


def _json_or_text(value: str) -> Any:
    try:
        return DECODER.decode(value)
    except (ValueError, RecursionError):
        return value


# --------------------------------------------------------------------------- LangChain XML

_XML_TOOL = re.compile(r"<tool>([^<>]{1,200})</tool>")
_XML_INPUT = re.compile(r"\s*<tool_input>")


def _langchain_xml(text: str, schemas: ToolSchemas) -> list[Span]:
    """LangChain's XML agent: ``<tool>NAME</tool><tool_input>INPUT</tool_input>``."""
    spans: list[Span] = []
    for tool in _XML_TOOL.finditer(text):
        name = html.unescape(tool.group(1)).strip()
        opened = _XML_INPUT.match(text, tool.end())
        if not opened:
            if known(name, schemas):
                spans.append(
                    (tool.start(), tool.end(), [call_from_input(tool.start(), name, None, schemas)])
                )
            continue
        following = text.find("<tool>", opened.end())
        limit = following if following >= 0 else len(text)
        close = text.find("</tool_input>", opened.end(), limit)
        stop = close if close >= 0 else limit
        end = close + len("</tool_input>") if close >= 0 else limit
        raw = html.unescape(text[opened.end() : stop])
        spans.append((tool.start(), end, [call_from_input(tool.start(), name, raw, schemas)]))
    return spans


# --------------------------------------------------------------------------- Gemma call:

# (opening, closing, string quote): FunctionGemma and Gemma 4 write calls as
# call:NAME{key:<quoted string>,n:42,flag:true,xs:[...],obj:{...}}.
_CALL_COLON_SYNTAXES = (
    ("<start_function_call>", "<end_function_call>", "<escape>"),
    ("<|tool_call>", "<tool_call|>", '<|"|>'),
)
_CALL_HEAD = re.compile(r"\s*call:([^\W\d][\w.\-]*)\s*(?=\{)")
_MAX_DEPTH = 32
_SCALAR_END = re.compile(r"[,}\]]")


def _call_colon(text: str, schemas: ToolSchemas) -> list[Span]:
    """Read Gemma's ``call:NAME{...}`` calls.

    FunctionGemma: ``<start_function_call>call:NAME{k:<escape>v<escape>}<end_function_call>``;
    Gemma 4: ``<|tool_call>call:NAME{k:<|"|>v<|"|>}<tool_call|>``.
    """
    spans: list[Span] = []
    for opening, closing, quote in _CALL_COLON_SYNTAXES:
        pos = text.find(opening)
        while pos >= 0 and len(spans) < _MAX_SPANS:
            body_start = pos + len(opening)
            following = text.find(opening, body_start)
            limit = following if following >= 0 else len(text)
            close = text.find(closing, body_start, limit)
            end = close + len(closing) if close >= 0 else limit
            body_end = close if close >= 0 else limit
            spans.append(
                (pos, end, [_call_colon_call(text, pos, body_start, body_end, quote, schemas)])
            )
            pos = following
    return spans


def _call_colon_call(
    text: str, pos: int, start: int, end: int, quote: str, schemas: ToolSchemas
) -> Attempt:
    head = _CALL_HEAD.match(text, start, end)
    if not head:
        return broken(pos, "", "expected call:NAME{...} after the call token")
    try:
        args, _after = _cc_value(text[:end], head.end(), quote, 0)
    except (ValueError, IndexError) as exc:
        return broken(pos, head.group(1), f"unreadable call arguments: {preview(str(exc), 60)}")
    return Attempt(pos, build_call(head.group(1), args, schemas), parsed=True)


def _cc_value(text: str, pos: int, quote: str, depth: int) -> tuple[Any, int]:
    """One value of the call:NAME{...} syntax at ``pos``; its end. Raises ValueError."""
    if depth > _MAX_DEPTH:
        raise ValueError("nested too deeply")
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    if text.startswith(quote, pos):
        close = text.find(quote, pos + len(quote))
        if close < 0:
            raise ValueError("unclosed string")
        return text[pos + len(quote) : close], close + len(quote)
    if text.startswith('"', pos):
        return DECODER.raw_decode(text, pos)
    opener = text[pos : pos + 1]
    if opener in ("{", "["):
        return _cc_container(text, pos, quote, depth)
    stop = _SCALAR_END.search(text, pos)
    token = text[pos : stop.start() if stop else len(text)].strip()
    if not token:
        raise ValueError(f"missing value at {pos}")
    return _json_or_text(token), stop.start() if stop else len(text)


def _cc_container(text: str, pos: int, quote: str, depth: int) -> tuple[Any, int]:
    is_object = text[pos] == "{"
    closer = "}" if is_object else "]"
    items: list[Any] = []
    fields: dict[str, Any] = {}
    pos += 1
    while True:
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= len(text):
            raise ValueError(f"unclosed {text[pos - 1 : pos]!r}")
        if text[pos] == closer:
            return (fields if is_object else items), pos + 1
        if is_object:
            colon = text.find(":", pos)
            if colon < 0:
                raise ValueError("a key without a value")
            key = text[pos:colon].strip().replace(quote, "").strip('"')
            fields[key], pos = _cc_value(text, colon + 1, quote, depth + 1)
        else:
            value, pos = _cc_value(text, pos, quote, depth + 1)
            items.append(value)


def _shift(attempt: Attempt, offset: int) -> Attempt:
    return Attempt(attempt.pos + offset, attempt.call, attempt.parsed, attempt.detail)
