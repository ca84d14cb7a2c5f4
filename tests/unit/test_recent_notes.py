"""Earlier notes, read incrementally and only as far back as a step can use them."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine

from contreact.checkpoints.cycles import CycleRecord, insert_cycle, recent_notes
from contreact.checkpoints.engines import engine_for
from contreact.checkpoints.storage import resolve_storage
from support.sql import Statements


def finish(engine: Engine, scope: str, *numbers: int, text: str = "note {}") -> None:
    with engine.begin() as conn:
        for cycle in numbers:
            insert_cycle(conn, scope, CycleRecord(cycle=cycle, reflection=text.format(cycle)))


def test_notes_finished_since_the_last_call_are_read_and_nothing_else(tmp_path: Path) -> None:
    engine = engine_for(resolve_storage(tmp_path))
    assert recent_notes(engine, "r", before=1) == (0, ())
    assert recent_notes(engine, "r", before=2) == (0, ())  # cycle 1 has not finished yet
    finish(engine, "r", 1, 2)
    older, notes = recent_notes(engine, "r", before=3, count=5)
    assert (older, [n.reflection for n in notes]) == (0, ["note 1", "note 2"])
    sql = Statements(engine)
    # A step replayed at a fork point asks for fewer: a prefix of what is known, no query.
    assert [n.cycle for n in recent_notes(engine, "r", before=2, count=5).notes] == [1]
    assert [n.cycle for n in recent_notes(engine, "r", before=3, count=5).notes] == [1, 2]
    assert sql.count == 0
    finish(engine, "r", 3)
    sql.count = 0
    assert [n.cycle for n in recent_notes(engine, "r", before=4, count=5).notes] == [1, 2, 3]
    assert sql.count == 1  # only cycle 3's row
    # Another scope is another history.
    assert recent_notes(engine, "r@b1", before=4) == (0, ())


def test_only_the_reach_asked_for_is_kept_and_older_notes_are_counted(tmp_path: Path) -> None:
    """A long run's step holds the newest notes it can use, never the whole past."""
    engine = engine_for(resolve_storage(tmp_path))
    finish(engine, "long", *range(1, 1001), text="{:06d}")  # 6 characters each
    sql = Statements(engine)
    older, notes = recent_notes(engine, "long", before=1001, chars=60, count=3)
    assert [n.cycle for n in notes] == list(range(991, 1001)) and older == 990
    fresh = sql.count
    assert fresh <= 3, "a batch of the newest rows and a count, not 1,000 rows"
    # Each later cycle reads its one new row, and the tail stays the same length.
    for cycle in range(1001, 1101):
        finish(engine, "long", cycle, text="{:06d}")
        older, notes = recent_notes(engine, "long", before=cycle + 1, chars=60, count=3)
        assert (older, len(notes), notes[-1].cycle) == (cycle - 10, 10, cycle)
    assert sql.count == fresh + 100 * 2  # the insert and the one new row, per cycle
    # A step that must reach further back (a prompt shown from cycle 950) gets it.
    older, notes = recent_notes(engine, "long", before=1101, since=950)
    assert notes[0].cycle <= 950 and older + len(notes) == 1100
