"""Planner statistics for the tables a run writes, on a PostgreSQL whose autovacuum is off.

PostgreSQL plans a query from each table's statistics, and plans a prepared statement once
for any parameters. Its autovacuum refreshes them as a table grows (after 50 rows plus
10 % changed); with autovacuum off, as on this project's test machines, a table keeps the
statistics of its first rows, or none. LangGraph's checkpoint read and the similarity
look-up were then planned as scans of everything the run had written, and the driver's
time per cycle grew with the run; after an ANALYZE the same read fetched a handful of rows
(figures: docs/benchmarks.md, long runs).

`Statistics` does the analyzing part of autovacuum for those tables while a process drives
a run: every `CHECK_S` seconds, in a thread of its own, it asks which of them changed past
autovacuum's default threshold since their last analysis, and analyzes those. The tables
grow geometrically between analyses, so a run of n cycles causes O(log n) of them, each
reading a bounded sample. With autovacuum on (PostgreSQL's default), or on SQLite, it does
nothing.
"""

from __future__ import annotations

import threading

from sqlalchemy import Engine, text

from contreact.checkpoints.fencing import RUN_TABLES, THREAD_TABLES

CHECK_S = 15.0
"""How often a driving process looks at its tables' change counts."""

TABLES = (*RUN_TABLES, *THREAD_TABLES)

# Sized by `reltuples` (the catalog's row count, kept by ANALYZE), as autovacuum sizes its
# threshold, not by the statistics collector's `n_live_tup`: that count starts at 0 in a
# database copied from a template or after a statistics reset, and every few rows written
# would then have a long run's tables analyzed again.
_STALE = text(
    "SELECT s.relid::regclass::text FROM pg_stat_user_tables s"
    " JOIN pg_class c ON c.oid = s.relid"
    " WHERE s.relname = ANY(:tables) AND s.schemaname = ANY(current_schemas(false))"
    " AND s.n_mod_since_analyze > 50 + 0.1 * greatest(c.reltuples, 0)"
)


def autovacuum_is_off(engine: Engine) -> bool:
    """True on a PostgreSQL server whose autovacuum is off (False on SQLite)."""
    if engine.dialect.name != "postgresql":
        return False
    with engine.connect() as conn:
        return conn.exec_driver_sql("SHOW autovacuum").scalar() == "off"


def refresh(engine: Engine) -> list[str]:
    """ANALYZE the run tables that changed past autovacuum's threshold; their names.

    A table another process is analyzing (or altering) is left for the next check: the
    lock is waited for one second at most.
    """
    done = []
    with engine.connect() as conn:
        stale = [str(r[0]) for r in conn.execute(_STALE, {"tables": list(TABLES)})]
        conn.commit()
        conn.exec_driver_sql("SET lock_timeout = '1s'")
        for table in stale:
            try:
                conn.exec_driver_sql(f"ANALYZE {table}")
                conn.commit()
                done.append(table)
            except Exception:  # noqa: BLE001 - a lock not granted: next time
                conn.rollback()
        conn.exec_driver_sql("RESET lock_timeout")
        conn.commit()
    return done


class Statistics:
    """While a run is driven: keep its tables' statistics fresh (see the module doc)."""

    def __init__(self, engine: Engine, every_s: float = CHECK_S) -> None:
        self.engine, self.every_s = engine, every_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _run(self) -> None:
        while True:
            try:
                refresh(self.engine)
            except Exception:  # noqa: BLE001, S110 - statistics are an optimisation only
                pass
            if self._stop.wait(self.every_s):
                return

    def __enter__(self) -> Statistics:
        try:
            needed = autovacuum_is_off(self.engine)
        except Exception:  # noqa: BLE001 - a failing database is the run's to report
            needed = False
        if needed:
            self._thread = threading.Thread(target=self._run, name="statistics", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            try:
                refresh(self.engine)  # what this drive wrote, for the next command's plans
            except Exception:  # noqa: BLE001, S110 - see `_run`
                pass
