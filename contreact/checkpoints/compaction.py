"""Compacting the database (`contreact vacuum`): the space deleted runs left, given back.

Deleting a run (or a run's superseded checkpoints) frees pages inside the database, which
neither SQLite nor PostgreSQL hands back to the file system by itself. On SQLite, VACUUM
rewrites the file without them and the write-ahead log is checkpointed and emptied around
it; on PostgreSQL, `VACUUM (ANALYZE)` makes dead rows' space reusable and refreshes the
planner's statistics (the files shrink only where their tail pages are empty).

VACUUM rewrites what a running process is writing to, so a database with a live run (a
fresh heartbeat, as `delete` checks it) is refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import text

from contreact.checkpoints.engines import engine_for
from contreact.checkpoints.registry import list_runs
from contreact.checkpoints.run_record import RunRecord
from contreact.checkpoints.storage import Storage


class LiveRunsError(Exception):
    """Runs are being driven right now; compacting would fight them for the database."""

    def __init__(self, live: list[RunRecord]) -> None:
        super().__init__(", ".join(r.run_id for r in live))
        self.live = live


@dataclass(frozen=True)
class Compacted:
    """What `vacuum` did: the database's bytes before and after."""

    where: str
    before: int
    after: int


def vacuum(storage: Storage) -> Compacted:
    """Compact the database of `storage`.

    Raises:
        LiveRunsError: A process drives a run in it now.
    """
    engine = engine_for(storage)
    live = [r for r in list_runs(engine) if r.shown_status == "running"]
    if live:
        raise LiveRunsError(live)
    if storage.is_sqlite:
        path = storage.sqlite_path
        before = _sqlite_bytes(path)
        raw = engine.raw_connection()
        try:
            conn = raw.driver_connection
            assert conn is not None
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            conn.execute("VACUUM")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            raw.close()
        return Compacted(str(path), before, _sqlite_bytes(path))
    size = text("SELECT pg_database_size(current_database())")
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        before = int(conn.execute(size).scalar_one())
        conn.execute(text("VACUUM (ANALYZE)"))
        after = int(conn.execute(size).scalar_one())
    return Compacted(storage.shown_url, before, after)


def _sqlite_bytes(path: Path) -> int:
    """The database file and its write-ahead log: what the data takes on disk."""
    wal = Path(f"{path}-wal")
    return path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)
