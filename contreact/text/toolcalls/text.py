"""Small text helpers shared by the parser's layers: flattening, previews, JSON, fences.

Why a module: every layer needs the same forgiving JSON decoder and the same way of
shortening model text for error messages, and none of them may raise.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

DECODER = json.JSONDecoder(strict=False)  # strict=False: models put raw newlines in strings
PREVIEW = 80

FENCE_OPEN = re.compile(r"```[\w+-]*[ \t]*\r?\n?")


def content_text(content: Any) -> str:
    """Flatten message content (a string or LangChain content blocks) to text."""
    if isinstance(content, str):
        return content
    if content is None:
        return ""
    if isinstance(content, list | tuple):
        parts: list[str] = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, Mapping) and isinstance(block.get("text"), str):
                parts.append(block["text"])
        return "".join(parts)
    return str(content)


def compact_json(value: Any) -> str:
    """JSON text without spaces (keeps non-ASCII as is)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def json_error(exc: BaseException) -> str:
    """A short description of a JSON decoding failure."""
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} at line {exc.lineno} column {exc.colno}"
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    return preview(str(exc))


def json_type_name(value: Any) -> str:
    """How a JSON value's type is named in corrective messages."""
    if isinstance(value, list | tuple):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if value is None:
        return "null"
    return type(value).__name__


def preview(text: str, limit: int = PREVIEW) -> str:
    """``text`` cut to ``limit`` characters (with an ellipsis when cut)."""
    text = str(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def preview_value(value: Any) -> str:
    """A short JSON rendering of any value."""
    try:
        shown = json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        shown = type(value).__name__
    return preview(shown, 60)


def unique(items: Iterable[str]) -> list[str]:
    """The non-empty items, first occurrence kept, in order."""
    return list(dict.fromkeys(item for item in items if item))


def strip_fences(text: str) -> str:
    """Remove a Markdown code fence wrapped around ``text`` (if any)."""
    stripped = text.strip()
    if not stripped.startswith("```"):
        return text
    opening = FENCE_OPEN.match(stripped)
    inner = stripped[opening.end() if opening else 3 :]
    if inner.rstrip().endswith("```"):
        inner = inner.rstrip()[:-3]
    return inner


def trim_one_newline(value: str) -> str:
    """Drop one leading and one trailing newline (the tag layout's, not the value's)."""
    if value.startswith("\r\n"):
        value = value[2:]
    elif value.startswith("\n"):
        value = value[1:]
    if value.endswith("\r\n"):
        value = value[:-2]
    elif value.endswith("\n"):
        value = value[:-1]
    return value


def unquote(text: str) -> str:
    """The text without one pair of matching quotes around it (JSON escapes decoded)."""
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'`":
        if text[0] == '"':
            try:
                decoded = json.loads(text)
                if isinstance(decoded, str):
                    return decoded
            except ValueError:
                pass
        return text[1:-1]
    return text


def mask(text: str, spans: Sequence[tuple[int, int]]) -> str:
    """Blank out ``spans`` (sorted, disjoint) so other layers skip them; offsets are kept."""
    if not spans:
        return text
    pieces: list[str] = []
    pos = 0
    for start, end in spans:
        if start < pos:
            continue
        pieces.append(text[pos:start])
        pieces.append(" " * (end - start))
        pos = end
    pieces.append(text[pos:])
    return "".join(pieces)
