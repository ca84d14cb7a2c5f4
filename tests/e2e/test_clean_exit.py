"""A command that ends leaves no SQLite write-ahead log behind, even beside another process.

SQLite folds the log into the file when the last connection closes. A finished run used to
rely on that, so while anything else had the file open (a second run, `batch --status`,
Studio; here an idle connection of the test) its log stayed at the size it had grown to,
8 MB after 30 cycles. Every command now checkpoints and empties the log as it closes.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from contreact.stub import StubServer
from support.backends import Backend
from support.cli import cli, cli_start, kill_when
from support.runs import write_config
from support.stub import scripted_stub

WAL_LIMIT = 1_000_000
"""Issue 30's bound on what a finished run may leave: no `-wal` file larger than 1 MB."""

CYCLE = [
    {"tool_calls": [{"name": "write", "arguments": {"key": "note", "value": "same"}}]},
    {"tool_calls": [{"name": "read", "arguments": {"key": "note"}}]},
    {"content": "Reflection for cycle {cycle}."},
]


def wal_bytes(backend: Backend) -> int:
    wal = Path(f"{backend.storage().sqlite_path}-wal")
    return wal.stat().st_size if wal.exists() else 0


@contextmanager
def another_reader(backend: Backend) -> Iterator[None]:
    """An idle connection of another process to the database, as a watcher holds one."""
    conn = sqlite3.connect(backend.storage().sqlite_path)
    conn.execute("SELECT count(*) FROM sqlite_master").fetchall()  # joins the log
    try:
        yield
    finally:
        conn.close()


def stub_for(cycles: int) -> StubServer:
    return scripted_stub(dict.fromkeys(range(1, cycles + 1), CYCLE))


def cycles_done(backend: Backend) -> int:
    try:
        conn = sqlite3.connect(f"{backend.storage().sqlite_path.as_uri()}?mode=ro", uri=True)
        try:
            return int(conn.execute("SELECT count(*) FROM contreact_cycles").fetchone()[0])
        finally:
            conn.close()
    except sqlite3.Error:
        return 0


def test_a_finished_run_leaves_no_log_beside_another_reader(
    tmp_path: Path, sqlite_backend: Backend
) -> None:
    backend = sqlite_backend
    backend.make()  # the file the other reader opens
    with stub_for(12) as server, another_reader(backend):
        config = write_config(
            tmp_path / "run.yaml", backend, cycles=12, ollama={"host": server.url}
        )
        result = cli(backend, "run", str(config))
        assert result.returncode == 0, result.stderr
        assert wal_bytes(backend) < WAL_LIMIT


def test_a_killed_run_resumed_leaves_no_log(tmp_path: Path, sqlite_backend: Backend) -> None:
    backend = sqlite_backend
    with stub_for(12) as server:
        config = write_config(
            tmp_path / "run.yaml", backend, cycles=12, ollama={"host": server.url}
        )
        proc = cli_start(backend, "run", str(config))
        kill_when(proc, lambda: cycles_done(backend) >= 5)
        with another_reader(backend):
            result = cli(backend, "resume", "run-1")
            assert result.returncode == 0, result.stderr
            assert cycles_done(backend) == 12
            assert wal_bytes(backend) < WAL_LIMIT
