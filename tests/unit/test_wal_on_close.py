"""Closing contreact's SQLite connections empties the write-ahead log, beside another reader.

SQLite folds the log in by itself only when the last connection to the file closes; with
another process's connection open, the log stayed at whatever size writes had grown it to.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from sqlalchemy import text

from contreact.checkpoints.engines import dispose_engines, engine_for
from contreact.checkpoints.saver import open_saver
from contreact.checkpoints.sqlite_file import WAL_KEPT_BYTES, truncate_wal
from contreact.checkpoints.storage import resolve_storage

ROWS = 300
ROW = "x" * 4000  # 300 rows of 4 kB: over a megabyte of log


def wal_size(db: Path) -> int:
    wal = Path(f"{db}-wal")
    return wal.stat().st_size if wal.exists() else 0


def idle_reader(db: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(db)
    conn.execute("SELECT count(*) FROM sqlite_master").fetchall()
    return conn


def test_disposing_the_engines_empties_the_log(tmp_path: Path) -> None:
    storage = resolve_storage(tmp_path)
    engine = engine_for(storage)
    reader = idle_reader(storage.sqlite_path)
    try:
        with engine.begin() as conn:
            conn.execute(text("CREATE TABLE filler (v TEXT)"))
            for _ in range(ROWS):
                conn.execute(text("INSERT INTO filler VALUES (:v)"), {"v": ROW})
        assert wal_size(storage.sqlite_path) > WAL_KEPT_BYTES
        dispose_engines()
        assert wal_size(storage.sqlite_path) == 0
    finally:
        reader.close()
        dispose_engines()


def test_closing_the_saver_empties_the_log(tmp_path: Path) -> None:
    storage = resolve_storage(tmp_path)
    with open_saver(storage) as saver:
        reader = idle_reader(storage.sqlite_path)
        conn = saver.conn  # type: ignore[attr-defined]
        conn.execute("CREATE TABLE filler (v TEXT)")
        conn.executemany("INSERT INTO filler VALUES (?)", [(ROW,)] * ROWS)
        conn.commit()
        assert wal_size(storage.sqlite_path) > WAL_KEPT_BYTES
    try:
        assert wal_size(storage.sqlite_path) == 0
    finally:
        reader.close()


def test_a_reader_in_a_transaction_keeps_the_log_and_the_close_does_not_wait(
    tmp_path: Path,
) -> None:
    db = tmp_path / "x.db"
    writer = sqlite3.connect(db, isolation_level=None, timeout=30)
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute("CREATE TABLE t (v TEXT)")
    reader = sqlite3.connect(db, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM t").fetchall()  # holds a snapshot
    writer.execute("INSERT INTO t VALUES ('after the snapshot')")
    try:
        started = time.monotonic()
        assert truncate_wal(writer) is False
        assert time.monotonic() - started < 2
    finally:
        reader.close()
        writer.close()
