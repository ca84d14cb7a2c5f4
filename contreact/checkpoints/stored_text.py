"""Text a backend cannot store, kept losslessly: the column types every text column uses.

A model writes whatever it likes, and PostgreSQL refuses one character of it: NUL (U+0000)
in a `text` column (psycopg will not even send it) and in `jsonb`. A reflection, a memory
key or value, a tool's argument or a failure reason holding a NUL must not stop the run
that wrote it, so on PostgreSQL such a value is stored escaped and read back as it was.

The escaped form is the marker U+FDD0 (a Unicode noncharacter, reserved for internal use)
followed by the value with `%` written `%25` and NUL written `%00`. Every value that starts
with the marker is escaped too, so a stored value starts with the marker exactly when it is
escaped: no text, however it looks, is taken for an escaped one. Values without NUL or the
marker (all but a few) are stored as they are, so the database stays readable by SQL.

SQLite stores NUL as it is: there the types do nothing, and the file is what it always was.
`Prepared` statements (which run on the raw DBAPI cursor) apply the same processing.
"""

from __future__ import annotations

import json
import re
from typing import Any

from sqlalchemy import String, Text
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator

MARK = "\ufdd0"
"""Starts every escaped value (and only those)."""

_ENCODED = re.compile("%(00|25)")


def needs_escape(value: str) -> bool:
    """Whether PostgreSQL needs `value` escaped (it holds NUL, or starts like an escaped one)."""
    return "\x00" in value or value.startswith(MARK)


def escape(value: str) -> str:
    """`value` as PostgreSQL stores it (itself unless `needs_escape`)."""
    if not needs_escape(value):
        return value
    return MARK + value.replace("%", "%25").replace("\x00", "%00")


def unescape(stored: str) -> str:
    """The value `escape` stored as `stored`."""
    if not stored.startswith(MARK):
        return stored
    return _ENCODED.sub(lambda m: "\x00" if m.group(1) == "00" else "%", stored[len(MARK) :])


def _escape_or_none(value: str | None) -> str | None:
    return None if value is None else escape(value)


def _unescape_or_none(value: str | None) -> str | None:
    return None if value is None else unescape(value)


def escapes_on(dialect: Dialect) -> bool:
    """Whether text is escaped on this backend (PostgreSQL; SQLite takes every character)."""
    return dialect.name == "postgresql"


class EscapedText(TypeDecorator[str]):
    """Text escaped on PostgreSQL as the module doc says; as it is elsewhere."""

    cache_ok = True

    def bind_processor(self, dialect: Dialect) -> Any:
        """`escape` on PostgreSQL, nothing elsewhere (the impl's text needs no processing)."""
        return _escape_or_none if escapes_on(dialect) else None

    def result_processor(self, dialect: Dialect, coltype: object) -> Any:
        """`unescape` on PostgreSQL, nothing elsewhere."""
        return _unescape_or_none if escapes_on(dialect) else None


class StoredText(EscapedText):
    """A `Text` column that stores any text (see the module doc)."""

    impl = Text
    cache_ok = True


class StoredString(EscapedText):
    """A `String(length)` column that stores any text (see the module doc)."""

    impl = String
    cache_ok = True


def _walk(value: Any, change: Any) -> Any:
    """`value` (decoded JSON) with `change` applied to every string in it, keys included."""
    if isinstance(value, str):
        return change(value)
    if isinstance(value, dict):
        return {change(k): _walk(v, change) for k, v in value.items()}
    if isinstance(value, list):
        return [_walk(v, change) for v in value]
    return value


def json_dumps(value: Any) -> str:
    """JSON for a PostgreSQL `jsonb` column: strings escaped where `needs_escape` says.

    `jsonb` refuses an escaped NUL; the escaped form holds none. The document is walked only
    when its plain JSON shows a NUL or the marker, which almost none does.
    """
    text = json.dumps(value)
    if "\\u0000" not in text and "\\ufdd0" not in text:
        return text
    return json.dumps(_walk(value, escape))


def json_loads(data: str | bytes | bytearray | memoryview) -> Any:
    """A `jsonb` document `json_dumps` wrote, its strings as they were."""
    text = bytes(data).decode("utf-8") if not isinstance(data, str) else data
    value = json.loads(text)
    return _walk(value, unescape) if MARK in text or "\\ufdd0" in text else value
