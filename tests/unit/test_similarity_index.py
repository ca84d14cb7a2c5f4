"""The similarity monitor's persisted index, and the bounded note tail, on both backends."""

from __future__ import annotations

from contreact.checkpoints.cycles import CycleRecord, insert_cycle, recent_notes
from contreact.checkpoints.engines import engine_for
from contreact.checkpoints.similarity_index import insert_keys, similar_notes
from support.backends import Backend


def test_the_newest_cycles_under_each_key_are_found_and_no_more(backend: Backend) -> None:
    engine = engine_for(backend.storage())
    with engine.begin() as conn:
        for cycle in range(1, 41):
            insert_cycle(conn, "r", CycleRecord(cycle=cycle, reflection=f"note {cycle}"))
            # Key 7 on every cycle, key -2**63 (a BIGINT's edge) on the even ones.
            insert_keys(conn, "r", cycle, [7, -(2**63)] if cycle % 2 == 0 else [7])
            insert_keys(conn, "r", cycle, [7])  # idempotent: a replayed cycle
        insert_keys(conn, "other", 1, [7])
    with engine.connect() as conn:
        found = similar_notes(conn, "r", [7, -(2**63), 99], before=30, per_key=3)
        assert [n.cycle for n in found] == [24, 26, 27, 28, 29]
        assert [n.reflection for n in found][:1] == ["note 24"]
        assert similar_notes(conn, "r", [7], before=30, per_key=0) == []
        assert similar_notes(conn, "r", [], before=30, per_key=3) == []
    # The note tail reads the same rows on both backends, newest first, in batches.
    older, notes = recent_notes(engine, "r", before=41, count=5)
    assert older + len(notes) == 40 and notes[-1].cycle == 40 and len(notes) >= 5


def test_a_look_up_on_postgresql_reads_the_cycles_found_not_the_run(
    postgres_backend: Backend,
) -> None:
    # PostgreSQL plans a statement it has prepared, once for any parameters, from the
    # table's statistics; with autovacuum off (as on this machine) there are none, and
    # `cycle IN (...)` was planned as a hash of every cycle of the run: 1,800 rows read per
    # cycle at cycle 1,800 of the long-run benchmark.
    from sqlalchemy import text

    engine = engine_for(postgres_backend.storage())
    cycles_run = 2_000
    with engine.begin() as conn:
        conn.execute(text("ALTER TABLE contreact_cycles SET (autovacuum_enabled = false)"))
        for cycle in range(1, cycles_run + 1):
            insert_cycle(conn, "r", CycleRecord(cycle=cycle, reflection=f"note {cycle}"))
            insert_keys(conn, "r", cycle, [7, 100 + cycle % 40])
    keys = [7, *range(100, 115)]
    with engine.connect() as conn:
        driver = conn.connection.driver_connection
        driver.prepare_threshold = 0  # prepared at once, as a run's connection does by the 5th
        conn.execute(text("SET plan_cache_mode = force_generic_plan"))
        found = similar_notes(conn, "r", keys, before=cycles_run + 1, per_key=8)
        read = conn.execute(
            text(
                "SELECT seq_tup_read + coalesce(idx_tup_fetch, 0) FROM pg_stat_xact_user_tables"
                " WHERE relname = 'contreact_cycles'"
            )
        ).scalar()
        conn.rollback()
    assert len(found) > 16
    assert read is not None and read <= len(found) + 8, (read, len(found))
