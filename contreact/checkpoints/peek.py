"""A read-only look at a SQLite registry with the standard library, for instant `list`/`status`.

Importing SQLAlchemy takes longer than the whole start-up budget of `contreact list` and
`status` (docs/benchmarks.md). On the default backend, a SQLite file, those two commands
read the registry and the finished-cycle counts here with `sqlite3`. Anything this cannot
answer exactly (PostgreSQL, a database missing or of another schema version, a locked
file) raises `Unreadable`, and the command takes the full path through
`checkpoints.registry`, which upgrades the tables of an older database and reports a
storage that does not exist (`checkpoints.engines`).
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import fields
from pathlib import Path

from contreact.checkpoints.locations import DB_FILENAME, default_data_dir
from contreact.checkpoints.run_record import RunNotFoundError, RunRecord, record_from_row

_COLUMNS = {f.name for f in fields(RunRecord)}


class Unreadable(Exception):
    """The fast read cannot answer this; use the full one."""


def sqlite_folder(data_dir: str | None, db_url: str | None) -> Path | None:
    """The data directory when storage is the default SQLite file (None: a database URL).

    As `checkpoints.storage.resolve_storage` decides it: `--data-dir`, else the default.
    """
    if db_url or os.environ.get("CONTREACT_DB_URL"):
        return None
    folder = Path(data_dir) if data_dir else default_data_dir()
    return folder.expanduser().resolve()


def _connect(folder: Path) -> sqlite3.Connection:
    path = folder / DB_FILENAME
    if not path.is_file():
        raise Unreadable(f"no database at {path}")
    try:
        conn = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, timeout=5)
    except sqlite3.Error as exc:
        raise Unreadable(str(exc)) from None
    conn.row_factory = sqlite3.Row
    return conn


def _record(row: sqlite3.Row) -> RunRecord:
    data = dict(row)
    if set(data) != _COLUMNS:
        raise Unreadable("the registry has another schema version")
    return record_from_row(data)


def _rows(folder: Path, query: str, args: tuple[str, ...]) -> list[sqlite3.Row]:
    conn = _connect(folder)
    try:
        return conn.execute(query, args).fetchall()
    except sqlite3.Error as exc:
        raise Unreadable(str(exc)) from None
    finally:
        conn.close()


def read_runs(folder: Path, run_id: str | None = None) -> list[RunRecord]:
    """All runs, oldest first (or the one named `run_id`: `RunNotFoundError` if none)."""
    query = "SELECT * FROM contreact_runs"
    args: tuple[str, ...] = ()
    if run_id is not None:
        query, args = query + " WHERE run_id = ?", (run_id,)
    rows = _rows(folder, query + " ORDER BY created_at, run_id", args)
    if run_id is not None and not rows:
        raise RunNotFoundError(run_id)
    return [_record(r) for r in rows]


def cycle_counts(folder: Path, run_id: str | None = None) -> dict[str, int]:
    """Finished cycles per run, of all runs or one (as `len(cycle_records(...))`)."""
    query = "SELECT run_id, COUNT(*) FROM contreact_cycles"
    args: tuple[str, ...] = ()
    if run_id is not None:
        query, args = query + " WHERE run_id = ?", (run_id,)
    return {str(run): int(count) for run, count in _rows(folder, query + " GROUP BY run_id", args)}
