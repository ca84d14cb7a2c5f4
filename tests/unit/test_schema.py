"""The database schema: an older database is brought up to date once, a current one is trusted.

Every command and every resume opens the engine, so the check that the tables are current
must cost one query, not an inspection of every table (measured: 220 ms on PostgreSQL).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from sqlalchemy import event
from sqlalchemy.engine import Engine

from contreact.checkpoints.engines import dispose_engines, engine_for
from contreact.checkpoints.schema import schema_fingerprint
from contreact.checkpoints.storage import resolve_storage


def _statements_while_opening(data_dir: Path) -> list[str]:
    """Open the engine for `data_dir` afresh and return the SQL it ran doing so."""
    dispose_engines()
    seen: list[str] = []

    def record(_conn: object, _cursor: object, statement: str, *_args: object) -> None:
        seen.append(statement)

    event.listen(Engine, "before_cursor_execute", record)
    try:
        engine_for(resolve_storage(data_dir))
    finally:
        event.remove(Engine, "before_cursor_execute", record)
        dispose_engines()
    return [s for s in seen if not s.startswith("PRAGMA")]


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

    opened = _statements_while_opening(tmp_path)
    assert any("ALTER TABLE contreact_runs ADD COLUMN heartbeat" in s for s in opened)

    with sqlite3.connect(db) as conn:
        columns = {row[1] for row in conn.execute("PRAGMA table_info(contreact_runs)")}
        assert {"origin", "heartbeat", "driver_host"} <= columns
        assert conn.execute("SELECT run_id, origin FROM contreact_runs").fetchall() == [
            ("old", "cli")
        ]
        marks = conn.execute("SELECT fingerprint FROM contreact_schema").fetchall()
        assert marks == [(schema_fingerprint(),)]


def test_a_current_database_is_opened_with_one_query(tmp_path: Path) -> None:
    first = _statements_while_opening(tmp_path)
    assert any(s.startswith("\nCREATE TABLE") or "CREATE TABLE" in s for s in first)
    again = _statements_while_opening(tmp_path)
    assert len(again) == 1 and "contreact_schema" in again[0], again


def test_a_changed_schema_is_brought_up_to_date_again(tmp_path: Path) -> None:
    _statements_while_opening(tmp_path)
    with sqlite3.connect(tmp_path / "contreact.db") as conn:
        conn.execute("UPDATE contreact_schema SET fingerprint = 'from an older contreact'")
    reopened = _statements_while_opening(tmp_path)
    assert len(reopened) > 1
    with sqlite3.connect(tmp_path / "contreact.db") as conn:
        marks = conn.execute("SELECT fingerprint FROM contreact_schema").fetchall()
    assert marks == [(schema_fingerprint(),)]


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
    _statements_while_opening(tmp_path)
    with sqlite3.connect(db) as conn:
        indexes = {r[1] for r in conn.execute("PRAGMA index_list(contreact_events)")}
        assert "ix_contreact_events_run_cycle" in indexes
        assert "ix_contreact_events_run_id" not in indexes
        plan = conn.execute(
            "EXPLAIN QUERY PLAN SELECT count(*) FROM contreact_events WHERE run_id = 'r' AND "
            "cycle = 7 AND \"key\" LIKE 'c7:s0:error:%'"
        ).fetchall()
        assert "ix_contreact_events_run_cycle (run_id=? AND cycle=?)" in str(plan)
