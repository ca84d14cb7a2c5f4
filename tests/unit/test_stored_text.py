"""Any text is stored and read back as it was: the escape PostgreSQL's text and jsonb need.

PostgreSQL refuses NUL in `text` and `jsonb`; `checkpoints.stored_text` stores such a value
escaped. The escape must give back every value exactly, leave the values PostgreSQL takes
as they are, and never take a value that only looks escaped for an escaped one.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy.dialects import postgresql, sqlite

from contreact.checkpoints.stored_text import (
    MARK,
    StoredText,
    escape,
    json_dumps,
    json_loads,
    unescape,
)

TRICKY = st.text(alphabet=st.sampled_from(["\x00", "%", "0", "2", "5", MARK, "a", "\x01"]))
"""Text made of the characters the escape is about, so that collisions would show."""


@given(st.one_of(st.text(), TRICKY))
def test_every_text_comes_back_as_it_was(value: str) -> None:
    stored = escape(value)
    assert "\x00" not in stored
    assert unescape(stored) == value


@given(TRICKY, TRICKY)
def test_two_texts_never_share_a_stored_form(a: str, b: str) -> None:
    assert (escape(a) == escape(b)) == (a == b)


def test_text_postgresql_takes_is_stored_as_it_is() -> None:
    for value in ("", "Reflection: done.", "100%00 sure", "%25", "a\x01b\x7f", '{"k": "\\u0000"}'):
        assert escape(value) == value
        assert unescape(value) == value


def test_text_that_looks_escaped_is_escaped_too() -> None:
    looks_escaped = MARK + "a%00b"
    stored = escape(looks_escaped)
    assert stored != looks_escaped and stored.startswith(MARK)
    assert unescape(stored) == looks_escaped
    assert escape("a\x00b") == MARK + "a%00b"
    assert escape("50%\x00") == MARK + "50%25%00"


JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.text(), TRICKY),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.one_of(st.text(), TRICKY), inner)
    ),
    max_leaves=12,
)


@given(JSON)
def test_jsonb_documents_come_back_as_they_were(value: Any) -> None:
    text = json_dumps(value)
    assert "\\u0000" not in text  # what jsonb refuses
    assert json_loads(text) == value
    assert json_loads(text.encode()) == value


def test_the_column_types_escape_on_postgresql_only() -> None:
    column = StoredText()
    pg, lite = postgresql.psycopg.dialect(), sqlite.dialect()
    to_pg, from_pg = column.bind_processor(pg), column.result_processor(pg, None)
    assert to_pg("a\x00b") == MARK + "a%00b" and from_pg(MARK + "a%00b") == "a\x00b"
    assert to_pg(None) is None and from_pg(None) is None
    assert column.bind_processor(lite) is None and column.result_processor(lite, None) is None
