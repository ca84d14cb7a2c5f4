"""`contreact delete RUN`: every row and file of the run goes, nothing of another run.

Two runs of one batch share every table and the batch folder; one is deleted and each
table is checked for both. A decoy scope shows that `_` in a run id matches only itself
(SQL LIKE would read it as "any character"). A live run is refused.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import yaml
from sqlalchemy import Engine, column, func, insert, inspect, or_, select, table

from contreact.stub import StubServer
from support.backends import Backend
from support.cli import cli, cli_in_process, cli_start
from support.runs import write_config

DOOMED = "del_1.stub-model.r1"
KEPT = "del_1.stub-model.r2"
DECOY_SCOPE = "delx1.stub-model.r1@feedbeef"
"""Would match `del_1.stub-model.r1@%` if `_` were a wildcard."""


def _engine(backend: Backend) -> Engine:
    from contreact.checkpoints.engines import engine_for

    return engine_for(backend.storage())


def rows_of(engine: Engine, run_id: str, thread_id: str) -> dict[str, int]:
    """Rows that belong to `run_id`, per table, in every table of the database."""
    counts: dict[str, int] = {}
    schema = inspect(engine)
    for name in schema.get_table_names():
        names = {c["name"] for c in schema.get_columns(name)}
        t = table(name, *(column(n) for n in names))
        mine = []
        if "run_id" in names:
            mine += [t.c.run_id == run_id, t.c.run_id.startswith(run_id + "@", autoescape=True)]
        if "scope" in names:
            mine += [t.c.scope == run_id, t.c.scope.startswith(run_id + "@", autoescape=True)]
        if "thread_id" in names:
            mine.append(t.c.thread_id == thread_id)
        if not mine:
            continue
        with engine.connect() as conn:
            counts[name] = int(
                conn.execute(select(func.count()).select_from(t).where(or_(*mine))).scalar_one()
            )
    return counts


def files_of(data_dir: Path) -> set[Path]:
    return {p.relative_to(data_dir) for p in data_dir.rglob("*") if p.is_file()}


def test_delete_removes_the_run_and_only_it(tmp_path: Path, backend: Backend) -> None:
    from contreact.checkpoints.registry import get_run
    from contreact.checkpoints.schema import memories

    with StubServer().start() as server:
        config = tmp_path / "batch.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "batch": "del_1",
                    "models": ["stub-model"],
                    "replicates": 2,
                    "parallel": 2,
                    "cycles": 2,
                    "ollama": {"host": server.url},
                }
            ),
            encoding="utf-8",
        )
        ran = cli(backend, "batch", str(config))
        assert ran.returncode == 0, ran.stdout + ran.stderr
    engine = _engine(backend)
    with engine.begin() as conn:
        # A branch of the doomed run (Studio time travel keeps one as scope RUN@LINEAGE),
        # and a decoy scope of another run.
        conn.execute(insert(memories).values(run_id=DOOMED + "@feedbeef", key="k", value="v"))
        conn.execute(insert(memories).values(run_id=DECOY_SCOPE, key="k", value="v"))
    doomed, kept = get_run(engine, DOOMED), get_run(engine, KEPT)
    before_doomed = rows_of(engine, DOOMED, doomed.thread_id)
    before_kept = rows_of(engine, KEPT, kept.thread_id)
    decoy_before = rows_of(engine, "delx1.stub-model.r1", "-")
    for name in (
        "contreact_runs",
        "contreact_events",
        "contreact_journal",
        "contreact_memories",
        "contreact_cycles",
        "contreact_similarity_keys",
        "checkpoints",
    ):
        assert before_doomed[name] > 0 and before_kept[name] > 0, name
    files_before = files_of(backend.data_dir)
    assert {
        Path("logs") / f"{DOOMED}.jsonl",
        Path("batches/del_1") / f"{DOOMED}.yaml",
        Path("batches/del_1") / f"{DOOMED}.out",
    } <= files_before

    refused = cli_in_process(backend, "delete", DOOMED)
    assert refused.returncode == 2 and "--yes" in refused.stderr
    assert rows_of(engine, DOOMED, doomed.thread_id) == before_doomed

    deleted = cli_in_process(backend, "delete", DOOMED, "--yes")
    assert deleted.returncode == 0, deleted.stderr
    assert f"Deleted run {DOOMED}" in deleted.stdout

    after_doomed = rows_of(engine, DOOMED, doomed.thread_id)
    assert after_doomed == {name: 0 for name in before_doomed}, after_doomed
    assert rows_of(engine, KEPT, kept.thread_id) == before_kept
    assert rows_of(engine, "delx1.stub-model.r1", "-") == decoy_before
    assert files_before - files_of(backend.data_dir) == {
        p for p in files_before if DOOMED in p.name
    }
    assert not (files_of(backend.data_dir) - files_before)
    gone = cli_in_process(backend, "status", DOOMED)
    assert gone.returncode == 2 and "no run named" in gone.stderr
    assert cli_in_process(backend, "status", KEPT).returncode == 0


def test_delete_refuses_a_live_run(tmp_path: Path, sqlite_backend: Backend) -> None:
    from contreact.checkpoints.registry import get_run

    with StubServer(latency_ms=300).start() as server:
        config = write_config(
            tmp_path / "c.yaml",
            sqlite_backend,
            run_id="live",
            cycles=50,
            ollama={"host": server.url},
        )
        proc = cli_start(sqlite_backend, "run", str(config))
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    if get_run(_engine(sqlite_backend), "live").driven:
                        break
                except Exception:  # noqa: BLE001 - not registered yet
                    pass
                assert time.monotonic() < deadline, "the run never started"
                time.sleep(0.1)
            refused = cli(sqlite_backend, "delete", "live", "--yes")
            assert refused.returncode == 2
            assert "run live is running" in refused.stderr and "stop it first" in refused.stderr
            assert get_run(_engine(sqlite_backend), "live").status == "running"
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.communicate(timeout=30)
    # Killed, it is interrupted: deleting it is allowed now.
    assert cli_in_process(sqlite_backend, "delete", "live", "--yes").returncode == 0
