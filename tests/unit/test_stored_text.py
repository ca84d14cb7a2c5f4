"""Any text is stored and read back as it was: the escape PostgreSQL's text and jsonb need.

PostgreSQL refuses NUL in `text` and `jsonb`; `checkpoints.stored_text` stores such a value
escaped. The escape must give back every value exactly, leave the values PostgreSQL takes
as they are, and never take a value that only looks escaped for an escaped one.
"""

from __future__ import annotations

from typing import Any

import pytest
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
from support.backends import Backend

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


@pytest.mark.postgres
def test_a_checkpoint_s_plain_values_keep_nul_on_postgresql(postgres_backend: Backend) -> None:
    """LangGraph keeps a state's strings in `jsonb`, which refuses NUL: the saver escapes them."""
    from langgraph.checkpoint.base import empty_checkpoint

    from contreact.checkpoints.engines import dispose_engines
    from contreact.checkpoints.saver import open_saver

    values = {"final_text": "Reflection: a\x00b", "opening": MARK + "100%00", "cycle": 3}
    try:
        with open_saver(postgres_backend.storage()) as saver:
            checkpoint = empty_checkpoint()
            checkpoint["channel_values"] = dict(values)
            versions = {k: saver.get_next_version(None, None) for k in values}
            checkpoint["channel_versions"] = versions
            config: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
            saved = saver.put(config, checkpoint, {"source": "input", "step": 1}, versions)
            found = saver.get_tuple(saved)
    finally:
        dispose_engines()
    assert found is not None and found.checkpoint["channel_values"] == values


@pytest.mark.postgres
def test_contreact_s_tables_keep_nul_on_postgresql_written_and_read_either_way(
    postgres_backend: Backend,
) -> None:
    """Core statements and the `Prepared` ones (raw cursor) store and read the same form."""
    import psycopg
    from sqlalchemy import select

    from contreact.checkpoints.engines import dispose_engines, engine_for
    from contreact.checkpoints.schema import memories
    from contreact.checkpoints.statements import Prepared, upsert
    from contreact.checkpoints.transactions import transaction

    engine = engine_for(postgres_backend.storage())
    try:
        with transaction(engine) as tx:  # a Prepared statement
            row = {"run_id": "r", "key": "k\x00", "value": "v\x00"}
            upsert(tx, memories, row, ["run_id", "key"])
        with engine.begin() as conn:  # SQLAlchemy Core
            conn.execute(memories.insert().values(run_id="r", key=MARK, value="50%00"))
        read = Prepared(lambda _: select(memories.c.key, memories.c.value))
        by_cursor = sorted(read.query(engine, {}))
        with engine.connect() as conn:
            by_core = [tuple(r) for r in conn.execute(select(memories.c.key, memories.c.value))]
    finally:
        dispose_engines()
    assert by_cursor == sorted([("k\x00", "v\x00"), (MARK, "50%00")])
    assert sorted(by_core) == by_cursor
    with psycopg.connect(str(postgres_backend.db_url).replace("+psycopg", "")) as raw:
        stored = raw.execute("SELECT key, value FROM contreact_memories").fetchall()
    assert sorted(stored) == sorted([(MARK + "k%00", MARK + "v%00"), (MARK + MARK, "50%00")])
