"""`contreact vacuum` gives back the space a deleted run left, and refuses while a run is live."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from contreact.stub import StubServer
from support.backends import Backend
from support.cli import cli, cli_in_process, cli_start
from support.runs import write_config


def not_vacuumed(backend: Backend) -> list[str]:
    import psycopg

    assert backend.db_url is not None
    url = backend.db_url.replace("postgresql+psycopg://", "postgresql://", 1)
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT relname FROM pg_stat_user_tables "
            "WHERE last_vacuum IS NULL OR last_analyze IS NULL"
        ).fetchall()
    return sorted(r[0] for r in rows)


def test_vacuum_gives_back_what_a_deleted_run_left(tmp_path: Path, backend: Backend) -> None:
    with StubServer().start() as server:
        for run_id in ("kept", "doomed"):
            config = write_config(
                tmp_path / f"{run_id}.yaml",
                backend,
                run_id=run_id,
                cycles=6,
                ollama={"host": server.url},
            )
            assert cli_in_process(backend, "run", str(config)).returncode == 0
    assert cli_in_process(backend, "delete", "doomed", "--yes").returncode == 0
    shown_before = cli_in_process(backend, "show", "kept", "--json").stdout

    result = cli_in_process(backend, "vacuum", "--json")

    assert result.returncode == 0, result.stderr
    sizes = json.loads(result.stdout)
    if backend.db_url is None:
        # SQLite rewrites the file without the deleted run's pages; the log is emptied.
        assert sizes["bytes_after"] < sizes["bytes_before"]
        db = backend.storage().sqlite_path
        assert sizes["bytes_after"] == db.stat().st_size
        assert not Path(f"{db}-wal").exists() or Path(f"{db}-wal").stat().st_size == 0
    else:
        # PostgreSQL's VACUUM makes the space reusable (its files rarely shrink) and
        # refreshes the planner's statistics: every table of ours was vacuumed and analysed.
        assert sizes["bytes_after"] > 0
        assert not_vacuumed(backend) == []
    assert cli_in_process(backend, "show", "kept", "--json").stdout == shown_before
    plain = cli_in_process(backend, "vacuum")
    assert plain.returncode == 0
    assert plain.stdout.startswith("Vacuumed ") and " MB -> " in plain.stdout


def test_vacuum_refuses_while_a_run_is_live(tmp_path: Path, sqlite_backend: Backend) -> None:
    from contreact.checkpoints.engines import engine_for
    from contreact.checkpoints.registry import get_run

    backend = sqlite_backend
    with StubServer(latency_ms=300).start() as server:
        config = write_config(
            tmp_path / "c.yaml", backend, run_id="live", cycles=50, ollama={"host": server.url}
        )
        proc = cli_start(backend, "run", str(config))
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    if get_run(engine_for(backend.storage()), "live").driven:
                        break
                except Exception:  # noqa: BLE001 - not registered yet
                    pass
                assert time.monotonic() < deadline, "the run never started"
                time.sleep(0.1)
            refused = cli(backend, "vacuum")
            assert refused.returncode == 2
            assert "run live is running" in refused.stderr
            assert "vacuum when no run is live" in refused.stderr
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.communicate(timeout=30)
    # Killed, it is interrupted: nothing writes to the database any more.
    assert cli_in_process(backend, "vacuum").returncode == 0
