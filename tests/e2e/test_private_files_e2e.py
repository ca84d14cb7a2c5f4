"""Data files are readable by their owner only (docs/faults.md).

A run's database and JSONL log hold everything the model and the operator wrote; with
the usual umask 022 they would be world-readable on a shared machine. The data
directory is created 0700 and every file in it 0600, whatever the umask.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from contreact.stub import StubServer
from support.backends import Backend
from support.cli import cli
from support.runs import write_config


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_data_directory_and_files_are_owner_only(tmp_path: Path) -> None:
    backend = Backend("sqlite", tmp_path / "home" / "runs")
    with StubServer().start() as server:
        config = write_config(tmp_path / "c.yaml", backend, cycles=1)
        # A permissive umask, as on many shared machines: it must not matter.
        old = os.umask(0o002)
        try:
            done = cli(backend, "run", str(config), "--host", server.url)
        finally:
            os.umask(old)
    assert done.returncode == 0, done.stderr
    assert _mode(tmp_path / "home") == 0o700
    folders = [backend.data_dir, *(p for p in backend.data_dir.rglob("*") if p.is_dir())]
    files = [p for p in backend.data_dir.rglob("*") if p.is_file()]
    assert {p.name for p in files} >= {"contreact.db", "run-1.jsonl"}
    assert {str(p): _mode(p) for p in folders} == {str(p): 0o700 for p in folders}
    assert {str(p): _mode(p) for p in files} == {str(p): 0o600 for p in files}


def test_a_rebuilt_log_and_the_wal_files_stay_owner_only(tmp_path: Path) -> None:
    from contreact.checkpoints.engines import engine_for
    from contreact.checkpoints.event_mirror import rebuild_log
    from contreact.checkpoints.private_files import open_private

    backend = Backend("sqlite", tmp_path / "runs")
    storage = backend.storage()
    old = os.umask(0o000)
    try:
        engine = engine_for(storage)
        with engine.begin() as conn:  # a write makes SQLite create -wal and -shm
            conn.exec_driver_sql("CREATE TABLE IF NOT EXISTS probe (x)")
            conn.exec_driver_sql("INSERT INTO probe VALUES (1)")
            wal = [p for p in backend.data_dir.iterdir() if p.name.endswith(("-wal", "-shm"))]
        rebuilt = rebuild_log(engine, storage, "nothing-yet")
        with open_private(backend.data_dir / "logs" / "other.jsonl") as fh:
            fh.write("{}\n")
    finally:
        os.umask(old)
    assert wal, "expected SQLite's WAL files"
    for path in [storage.sqlite_path, *wal, rebuilt, backend.data_dir / "logs" / "other.jsonl"]:
        assert _mode(path) == 0o600, path
    assert _mode(backend.data_dir / "logs") == 0o700
