"""Earlier notes, read incrementally: every prompt of a long run needs all of them."""

from __future__ import annotations

from pathlib import Path

from contreact.checkpoints.cycles import CycleRecord, earlier_notes, insert_cycle
from contreact.checkpoints.engines import engine_for
from contreact.checkpoints.storage import resolve_storage
from support.sql import Statements


def test_notes_finished_since_the_last_call_are_read_and_nothing_else(tmp_path: Path) -> None:
    engine = engine_for(resolve_storage(tmp_path))

    def finish(cycle: int) -> None:
        with engine.begin() as conn:
            insert_cycle(conn, "r", CycleRecord(cycle=cycle, reflection=f"note {cycle}"))

    assert earlier_notes(engine, "r", before=1) == ()
    assert earlier_notes(engine, "r", before=2) == ()  # cycle 1 has not finished yet
    finish(1)
    finish(2)
    assert [n.reflection for n in earlier_notes(engine, "r", before=3)] == ["note 1", "note 2"]
    sql = Statements(engine)
    # A step replayed at a fork point asks for fewer: a prefix of what is known, no query.
    assert [n.cycle for n in earlier_notes(engine, "r", before=2)] == [1]
    assert [n.cycle for n in earlier_notes(engine, "r", before=3)] == [1, 2]
    assert sql.count == 0
    finish(3)
    sql.count = 0
    assert [n.cycle for n in earlier_notes(engine, "r", before=4)] == [1, 2, 3]
    assert sql.count == 1  # only cycle 3's row
    # Another scope is another history.
    assert earlier_notes(engine, "r@b1", before=4) == ()
