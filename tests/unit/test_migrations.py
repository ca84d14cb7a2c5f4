"""contreact's tables are made and changed by Alembic revisions, and reading never creates them.

The revisions must make exactly the tables `checkpoints.schema` declares, on both backends;
a database made before migrations is adopted at the baseline and upgraded with its rows;
a current database costs one query to open; and a storage that must exist (a command that
only reads) and does not is reported with nothing created in it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, event, text

from contreact.checkpoints.engines import dispose_engines, engine_for
from contreact.checkpoints.migrations import (
    BASELINE,
    HEAD,
    SCRIPT_LOCATION,
    VERSION_TABLE,
    ours,
)
from contreact.checkpoints.schema import metadata
from contreact.checkpoints.storage import Storage, resolve_storage
from contreact.checkpoints.storage_faults import StorageFault
from contreact.checkpoints.stored_text import MARK
from contreact.errors import StorageNotFoundError
from support.backends import Backend


@pytest.fixture(autouse=True)
def _fresh_engines() -> Iterator[None]:
    dispose_engines()
    yield
    dispose_engines()


def _differences(engine: Engine) -> list[object]:
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    with engine.connect() as conn:
        opts = {"version_table": VERSION_TABLE, "include_name": ours}
        context = MigrationContext.configure(conn, opts=opts)
        return list(compare_metadata(context, metadata))


def _version(engine: Engine) -> str:
    with engine.connect() as conn:
        return str(conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalar_one())


def test_head_is_the_newest_revision_and_the_baseline_the_oldest() -> None:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    config = Config()
    config.set_main_option("script_location", SCRIPT_LOCATION)
    scripts = ScriptDirectory.from_config(config)
    assert scripts.get_heads() == [HEAD]
    assert scripts.get_bases() == [BASELINE]


def test_the_revisions_make_exactly_the_declared_tables(backend: Backend) -> None:
    engine = engine_for(backend.storage())
    assert _version(engine) == HEAD
    assert _differences(engine) == []


def _statements_while_opening(storage: Storage) -> list[str]:
    """Open the engine for `storage` afresh and return the SQL it ran doing so."""
    dispose_engines()
    seen: list[str] = []

    def record(_conn: object, _cursor: object, statement: str, *_args: object) -> None:
        seen.append(statement)

    event.listen(Engine, "before_cursor_execute", record)
    try:
        engine_for(storage)
    finally:
        event.remove(Engine, "before_cursor_execute", record)
        dispose_engines()
    return [s for s in seen if not s.startswith("PRAGMA")]


def test_a_current_database_is_opened_with_one_query(tmp_path: Path) -> None:
    first = _statements_while_opening(resolve_storage(tmp_path))
    assert any("CREATE TABLE" in s for s in first)
    again = _statements_while_opening(resolve_storage(tmp_path))
    assert again == [f"SELECT version_num FROM {VERSION_TABLE}"], again


def test_an_older_database_gets_its_new_columns_and_keeps_its_rows(tmp_path: Path) -> None:
    db = tmp_path / "contreact.db"
    with sqlite3.connect(db) as conn:  # a runs table from before heartbeats and origins
        conn.execute(
            "CREATE TABLE contreact_runs (run_id VARCHAR(200) PRIMARY KEY, thread_id VARCHAR(64) "
            "NOT NULL UNIQUE, status VARCHAR(20) NOT NULL, model VARCHAR(200) NOT NULL, host "
            "VARCHAR(500) NOT NULL, config TEXT NOT NULL, reason TEXT NOT NULL, parent_run_id "
            "VARCHAR(200), fork_cycle INTEGER, batch VARCHAR(200), pid INTEGER, created_at "
            "VARCHAR(40) NOT NULL, updated_at VARCHAR(40) NOT NULL)"
        )
        conn.execute(
            "INSERT INTO contreact_runs VALUES ('old', 't-1', 'completed', 'm', '', '{}', '', "
            "NULL, NULL, NULL, NULL, '2026-01-01', '2026-01-01')"
        )
    conn.close()

    # Reading adopts it too: it is contreact's, only older.
    engine = engine_for(resolve_storage(tmp_path).existing())
    assert _version(engine) == HEAD
    with sqlite3.connect(db) as conn:
        columns = {row[1] for row in conn.execute("PRAGMA table_info(contreact_runs)")}
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
    conn.close()
    assert {"origin", "heartbeat", "driver_host"} <= columns
    assert {t.name for t in metadata.sorted_tables} <= tables
    with engine.connect() as c:
        assert c.execute(text("SELECT run_id, origin FROM contreact_runs")).all() == [
            ("old", "cli")
        ]


def test_an_older_event_log_gets_the_run_cycle_index_instead_of_the_run_index(
    tmp_path: Path,
) -> None:
    """Per-cycle event queries go through (run_id, cycle); the run_id-only index is dropped."""
    db = tmp_path / "contreact.db"
    with sqlite3.connect(db) as conn:  # the events table as an older contreact made it
        conn.execute(
            "CREATE TABLE contreact_events (id INTEGER PRIMARY KEY, run_id VARCHAR(200) NOT NULL,"
            ' "key" VARCHAR(200) NOT NULL, cycle INTEGER NOT NULL, event_type VARCHAR(40) NOT '
            "NULL, timestamp VARCHAR(40) NOT NULL, payload TEXT NOT NULL, CONSTRAINT "
            'uq_contreact_events_run_key UNIQUE (run_id, "key"))'
        )
        conn.execute("CREATE INDEX ix_contreact_events_run_id ON contreact_events (run_id)")
    conn.close()
    engine_for(resolve_storage(tmp_path))
    dispose_engines()
    with sqlite3.connect(db) as conn:
        indexes = {r[1] for r in conn.execute("PRAGMA index_list(contreact_events)")}
        assert "ix_contreact_events_run_cycle" in indexes
        assert "ix_contreact_events_run_id" not in indexes
        plan = conn.execute(
            "EXPLAIN QUERY PLAN SELECT count(*) FROM contreact_events WHERE run_id = 'r' AND "
            "cycle = 7 AND \"key\" LIKE 'c7:s0:error:%'"
        ).fetchall()
        assert "ix_contreact_events_run_cycle (run_id=? AND cycle=?)" in str(plan)
    conn.close()


def test_reading_a_missing_folder_creates_nothing(tmp_path: Path) -> None:
    typo = tmp_path / "rnus"
    with pytest.raises(StorageNotFoundError) as caught:
        engine_for(resolve_storage(typo).existing())
    assert str(caught.value).startswith(f"no contreact database in {typo} (no such folder);")
    assert not typo.exists()
    missing = tmp_path / "elsewhere.db"
    with pytest.raises(StorageNotFoundError, match=f"no contreact database at {missing};"):
        engine_for(resolve_storage(None, f"sqlite:///{missing}").existing())
    assert list(tmp_path.iterdir()) == []


def test_reading_a_database_without_contreact_tables_changes_nothing(tmp_path: Path) -> None:
    foreign = tmp_path / "contreact.db"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE notes (body TEXT)")
    conn.close()
    before = foreign.read_bytes()
    with pytest.raises(StorageNotFoundError, match=f"{foreign} holds no contreact tables"):
        engine_for(resolve_storage(tmp_path).existing())
    assert foreign.read_bytes() == before


@pytest.mark.postgres
def test_reading_a_postgresql_database_without_contreact_tables_creates_nothing(
    postgres_backend: Backend,
) -> None:
    storage = postgres_backend.storage()
    with pytest.raises(StorageNotFoundError, match="holds no contreact tables"):
        engine_for(storage.existing())
    engine = engine_for(storage)  # a command that starts runs creates it
    dispose_engines()
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM contreact_runs")).scalar_one() == 0


def test_a_database_of_a_newer_contreact_is_refused_in_one_line(tmp_path: Path) -> None:
    engine = engine_for(resolve_storage(tmp_path))
    with engine.begin() as conn:
        conn.execute(text(f"UPDATE {VERSION_TABLE} SET version_num = '9999'"))
    dispose_engines()
    with pytest.raises(StorageFault) as caught:
        engine_for(resolve_storage(tmp_path))
    assert str(caught.value) == (
        f"database {tmp_path / 'contreact.db'} is at schema revision 9999, which this "
        "contreact does not know: it was upgraded by a newer contreact; upgrade contreact to "
        "use it"
    )


@pytest.mark.postgres
def test_text_written_before_escaping_that_looks_escaped_reads_back_as_written(
    postgres_backend: Backend,
) -> None:
    from alembic import command
    from alembic.config import Config

    engine = engine_for(postgres_backend.storage())
    config = Config()
    config.set_main_option("script_location", SCRIPT_LOCATION)
    with engine.begin() as conn:  # back to the baseline, and text as it could be written then
        config.attributes["connection"] = conn
        command.downgrade(config, BASELINE)
        conn.execute(
            text("INSERT INTO contreact_memories VALUES ('r', :key, :value)"),
            {"key": MARK + "k", "value": MARK + "100%00"},
        )
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, "head")
    from contreact.tools.memory import memory_snapshot

    assert memory_snapshot(engine, "r") == {MARK + "k": MARK + "100%00"}
