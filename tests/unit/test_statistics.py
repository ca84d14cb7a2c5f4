"""Planner statistics kept for the run tables on a PostgreSQL without autovacuum (issue 30)."""

from __future__ import annotations

import time

from sqlalchemy import Engine, text

from contreact.checkpoints.cycles import CycleRecord, insert_cycle
from contreact.checkpoints.engines import engine_for
from contreact.checkpoints.statistics import Statistics, autovacuum_is_off, refresh
from support.backends import Backend


def analyses(engine: Engine, table: str) -> int:
    with engine.connect() as conn:
        found = conn.execute(
            text(
                "SELECT analyze_count + autoanalyze_count FROM pg_stat_user_tables"
                " WHERE relname = :t"
            ),
            {"t": table},
        ).scalar()
    return int(found or 0)


def refreshed_within(engine: Engine, seconds: float) -> list[str]:
    # The server counts a table's changes a moment after they commit.
    deadline = time.monotonic() + seconds
    while True:
        done = refresh(engine)
        if done or time.monotonic() > deadline:
            return done
        time.sleep(0.2)


def test_a_table_that_grew_is_analyzed_once_and_then_left_alone(
    postgres_backend: Backend,
) -> None:
    engine = engine_for(postgres_backend.storage())
    before = analyses(engine, "contreact_cycles")
    with engine.begin() as conn:
        for cycle in range(1, 301):
            insert_cycle(conn, "r", CycleRecord(cycle=cycle, reflection=f"note {cycle}"))
    done = refreshed_within(engine, 10)
    assert [name.split(".")[-1] for name in done] == ["contreact_cycles"]
    assert analyses(engine, "contreact_cycles") == before + 1
    # Unchanged since: nothing to do (a run's tables are analyzed O(log n) times).
    assert refresh(engine) == []
    with engine.begin() as conn:  # 10 more rows: under the threshold of 50 + 10 %
        for cycle in range(301, 311):
            insert_cycle(conn, "r", CycleRecord(cycle=cycle, reflection=f"note {cycle}"))
    time.sleep(1.5)
    assert refresh(engine) == []


def test_the_threshold_is_the_tables_size_not_the_counters_since_a_reset(
    postgres_backend: Backend,
) -> None:
    # A database made from a template (a copy of a run), or one whose statistics were
    # reset, counts its rows from 0: 60 new rows in a table of 300 are not a table that grew.
    engine = engine_for(postgres_backend.storage())
    with engine.begin() as conn:
        for cycle in range(1, 301):
            insert_cycle(conn, "r", CycleRecord(cycle=cycle, reflection=f"note {cycle}"))
    refreshed_within(engine, 10)
    with engine.begin() as conn:
        conn.execute(
            text("SELECT pg_stat_reset_single_table_counters('contreact_cycles'::regclass)")
        )
    before = analyses(engine, "contreact_cycles")
    with engine.begin() as conn:  # over 50, under 50 + 10 % of 300
        for cycle in range(301, 361):
            insert_cycle(conn, "r", CycleRecord(cycle=cycle, reflection=f"note {cycle}"))
    time.sleep(1.5)
    assert refresh(engine) == []
    assert analyses(engine, "contreact_cycles") == before


def test_statistics_are_kept_only_where_autovacuum_is_off(
    postgres_backend: Backend, sqlite_backend: Backend
) -> None:
    assert not autovacuum_is_off(engine_for(sqlite_backend.storage()))
    engine = engine_for(postgres_backend.storage())
    with Statistics(engine, every_s=0.1) as kept:
        assert (kept._thread is not None) == autovacuum_is_off(engine)
