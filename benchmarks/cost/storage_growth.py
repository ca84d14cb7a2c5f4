"""(b) Database bytes per cycle at cycles 10, 100 and 200 of one long run.

What it measures: how many bytes one cycle adds to the database early and late in a run
whose work per cycle is constant - the constant-work script of ``common.CONSTANT_CYCLE``
(each cycle overwrites the same memory key, reads it back and answers with a note of
fixed length; three model calls, two tool calls). Whatever grows from cycle to cycle is
then the framework's doing, not the agent's. Checkpoint storage per cycle must stay
flat as a run grows.

How: one contreact run (in this process, ``start_run``) against the stub (a child
process, 0 ms latency) on a fresh SQLite file (or a throwaway PostgreSQL database with
``--db-url``). A runner ``Progress`` hook takes a snapshot at the end of every cycle
(when the ``reflect`` node reports):

* logical bytes per table: the sum of the stored length of every column of every row
  (SQLite ``length()``, PostgreSQL ``pg_column_size(row)``), exact and free of page
  granularity. "Checkpoint tables" are LangGraph's (``checkpoints``, ``writes``;
  on PostgreSQL also ``checkpoint_blobs``, ``checkpoint_writes``); "contreact tables"
  are the registry, event log, journal, memory and cycles tables;
* physical bytes: on SQLite the size of the database file plus its WAL right after
  ``PRAGMA wal_checkpoint(TRUNCATE)`` (so the WAL is empty and every page is counted
  once); on PostgreSQL ``pg_database_size()``;
* the run's JSONL event log file, for information.

Bytes per cycle at cycle N is the growth over the window of cycles (N-10, N] divided by
10 (page-granular physical sizes need the window; logical sizes are exact per cycle).
Two figures get the target "at cycle 200 <= 1.2x at cycle 10": the checkpoint tables
(the flatness requirement) and the whole database file.
"""

from __future__ import annotations

import os
import sqlite3
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The shared helpers (common.py, ...) are in benchmarks/, the folder above this one.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import (
    BenchStorage,
    Figure,
    StubProcess,
    bench_storage,
    constant_work_scenario,
    now,
    parser,
    print_table,
    report,
    run_config,
)

from contreact.engine.outcome import SilentProgress

CHECKPOINT_TABLES = ("checkpoints", "writes", "checkpoint_blobs", "checkpoint_writes")


@dataclass
class Snapshot:
    """Sizes at the end of one cycle."""

    cycle: int
    tables: dict[str, int]
    """Logical bytes per table."""
    physical: int
    """Database file + WAL (SQLite, after a TRUNCATE checkpoint) or pg_database_size."""
    log_file: int
    """The run's JSONL log."""

    @property
    def checkpoint_bytes(self) -> int:
        """Logical bytes in LangGraph's checkpoint tables."""
        return sum(v for k, v in self.tables.items() if k in CHECKPOINT_TABLES)

    @property
    def contreact_bytes(self) -> int:
        """Logical bytes in contreact's own tables."""
        return sum(v for k, v in self.tables.items() if k not in CHECKPOINT_TABLES)


class Measurer:
    """Reads table and file sizes of one storage."""

    def __init__(self, where: BenchStorage, run_id: str) -> None:
        self.where = where
        self.run_id = run_id
        self._columns: dict[str, list[str]] = {}

    def snapshot(self, cycle: int) -> Snapshot:
        """Measure everything now."""
        tables, physical = self._sqlite() if self.where.is_sqlite else self._postgres()
        log = self.where.data_dir / "logs" / f"{self.run_id}.jsonl"
        return Snapshot(cycle, tables, physical, log.stat().st_size if log.exists() else 0)

    def _sqlite(self) -> tuple[dict[str, int], int]:
        path = self.where.sqlite_path
        conn = sqlite3.connect(str(path), timeout=30, isolation_level=None)
        try:
            busy = 1
            for _ in range(50):
                busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
                if busy == 0:
                    break
            if busy:
                raise RuntimeError("could not truncate the WAL (a reader held it)")
            names = [
                r[0]
                for r in conn.execute(
                    "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite%'"
                )
            ]
            tables = {}
            for name in names:
                if name not in self._columns:
                    self._columns[name] = [
                        r[1] for r in conn.execute(f'PRAGMA table_info("{name}")')
                    ]
                expr = " + ".join(f'coalesce(length("{c}"), 0)' for c in self._columns[name])
                tables[name] = int(
                    conn.execute(f'SELECT coalesce(sum({expr}), 0) FROM "{name}"').fetchone()[0]
                )
        finally:
            conn.close()
        wal = Path(f"{path}-wal")
        physical = path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)
        return tables, physical

    def _postgres(self) -> tuple[dict[str, int], int]:
        import psycopg

        assert self.where.db_url is not None
        url = self.where.db_url.replace("postgresql+psycopg://", "postgresql://", 1)
        with psycopg.connect(url, autocommit=True) as conn:
            names = [
                r[0]
                for r in conn.execute(
                    "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
                ).fetchall()
            ]
            tables = {}
            for name in names:
                row = conn.execute(
                    f'SELECT coalesce(sum(pg_column_size(t.*)), 0) FROM "{name}" t'
                ).fetchone()
                tables[name] = int(row[0]) if row else 0
            size = conn.execute("SELECT pg_database_size(current_database())").fetchone()
        return tables, int(size[0]) if size else 0


@dataclass
class SnapshotProgress(SilentProgress):
    """A runner `Progress` that snapshots sizes at the start and after every cycle."""

    measurer: Measurer
    snapshots: list[Snapshot] = field(default_factory=list)
    measuring_s: float = 0.0

    def started(self, record: Any, state: Any, resumed: bool) -> None:
        """Snapshot 'cycle 0': the registered run, before any cycle."""
        self._take(0)

    def update(self, node: str, update: dict[str, Any]) -> None:
        """Snapshot when a cycle ends."""
        if node == "reflect":
            self._take(len(self.snapshots))

    def _take(self, cycle: int) -> None:
        started = now()
        self.snapshots.append(self.measurer.snapshot(cycle))
        self.measuring_s += now() - started


def per_cycle(snaps: list[Snapshot], cycle: int, window: int, attr: str) -> float:
    """Mean growth of ``attr`` per cycle over the cycles (cycle-window, cycle]."""
    end, start = snaps[cycle], snaps[max(0, cycle - window)]
    cycles = end.cycle - start.cycle
    return (getattr(end, attr) - getattr(start, attr)) / cycles


def growth(snaps: list[Snapshot], points: list[int], window: int, attr: str) -> float:
    """Bytes per cycle at the last point divided by those at the first."""
    return per_cycle(snaps, points[-1], window, attr) / per_cycle(snaps, points[0], window, attr)


def table_per_cycle(snaps: list[Snapshot], cycle: int, window: int, table: str) -> float:
    """Mean growth of one table's logical bytes per cycle over the window ending at ``cycle``."""
    end, start = snaps[cycle], snaps[max(0, cycle - window)]
    return (end.tables.get(table, 0) - start.tables.get(table, 0)) / (end.cycle - start.cycle)


def event_bytes_by_type(where: BenchStorage, run_id: str, cycles: list[int]) -> dict[str, Any]:
    """Event payload bytes per (cycle, event type), to show which events grow."""
    from sqlalchemy import func, select

    from contreact.checkpoints.engines import engine_for
    from contreact.checkpoints.schema import events

    engine = engine_for(where.storage())
    query = (
        select(events.c.cycle, events.c.event_type, func.sum(func.length(events.c.payload)))
        .where(events.c.run_id == run_id, events.c.cycle.in_(cycles))
        .group_by(events.c.cycle, events.c.event_type)
    )
    out: dict[str, Any] = {}
    with engine.connect() as conn:
        for cycle, kind, size in conn.execute(query):
            out.setdefault(kind, {})[int(cycle)] = int(size or 0)
    return out


def main() -> None:
    args = parser(__doc__.splitlines()[0]).parse_args()
    points, window = ([10, 20, 30], 5) if args.quick else ([10, 100, 200], 10)
    cycles = points[-1]
    with bench_storage(args.db_url) as where:
        workdir = where.data_dir.parent
        run_id = f"growth-{uuid.uuid4().hex[:6]}"
        with StubProcess(constant_work_scenario(cycles), workdir) as stub:
            from contreact.config import parse_config
            from contreact.engine.runner import start_run

            progress = SnapshotProgress(Measurer(where, run_id))
            config = parse_config(run_config(run_id, stub.url, cycles, where), "benchmark")
            started = now()
            outcome = start_run(config, where.storage(), progress=progress)
            elapsed = now() - started
        if outcome.status != "completed":
            raise RuntimeError(f"run ended {outcome.status}: {outcome.reason}")
        snaps = progress.snapshots
        by_type = event_bytes_by_type(where, run_id, points)
        backend = "SQLite" if where.is_sqlite else "PostgreSQL"
        print(
            f"{cycles} cycles in {elapsed:.1f} s on {backend} "
            f"({progress.measuring_s:.1f} s of it measuring)"
        )

    columns = [
        ("checkpoint tables", "checkpoint_bytes"),
        ("contreact tables", "contreact_bytes"),
        (
            "database file (DB+WAL)" if where.is_sqlite else "pg_database_size",
            "physical",
        ),
        ("JSONL log file", "log_file"),
    ]
    rows = []
    for point in points:
        rows.append([f"{point}", *[per_cycle(snaps, point, window, attr) for _, attr in columns]])
    rows.append(
        [
            f"ratio {points[-1]}/{points[0]}",
            *[f"{growth(snaps, points, window, a):.2f}x" for _, a in columns],
        ]
    )
    print_table(
        ["cycle", *[f"{name} B/cycle" for name, _ in columns]],
        rows,
        title=f"(b) bytes per cycle (mean over the {window} cycles ending at the cycle shown)",
    )
    tables = sorted(snaps[-1].tables, key=lambda t: -snaps[-1].tables[t])
    print_table(
        ["table (logical bytes)", *[f"B/cycle @{p}" for p in points], "total at end"],
        [
            [t, *[table_per_cycle(snaps, p, window, t) for p in points], snaps[-1].tables[t]]
            for t in tables
        ],
        title="Per table",
    )
    print_table(
        ["event type (payload bytes)", *[f"cycle {p}" for p in points]],
        [[kind, *[sizes.get(p, 0) for p in points]] for kind, sizes in sorted(by_type.items())],
        title="Event payload bytes in single cycles",
    )
    first, last = points[0], points[-1]
    checkpoint = per_cycle(snaps, last, window, "checkpoint_bytes") / per_cycle(
        snaps, first, window, "checkpoint_bytes"
    )
    physical = per_cycle(snaps, last, window, "physical") / per_cycle(
        snaps, first, window, "physical"
    )
    report(
        [
            Figure(
                "b",
                f"checkpoint-table bytes/cycle, cycle {last} vs {first}",
                checkpoint,
                "x",
                1.2,
                note=f"{per_cycle(snaps, first, window, 'checkpoint_bytes'):,.0f} -> "
                f"{per_cycle(snaps, last, window, 'checkpoint_bytes'):,.0f} B/cycle",
            ),
            Figure(
                "b-db",
                f"whole-database bytes/cycle, cycle {last} vs {first}",
                physical,
                "x",
                1.2,
                note=f"{per_cycle(snaps, first, window, 'physical'):,.0f} -> "
                f"{per_cycle(snaps, last, window, 'physical'):,.0f} B/cycle",
            ),
        ],
        args.json,
    )
    if os.environ.get("BENCH_KEEP"):
        print(f"(data kept in {workdir})")


if __name__ == "__main__":
    main()
