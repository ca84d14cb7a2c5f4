"""Reading never creates: a storage that does not exist is reported, and nothing is made there.

A mistyped folder given to `list`, `export --batch`, `batch --status` or `contreact.load`
once got a new 229 KB database and the answer "No runs yet"; `contreact worker` pointed at
an empty PostgreSQL database made 19 tables there and said every queued run was finished.
Every command that only reads (or changes runs that must exist) now exits 2 with one line
naming what it looked at; a storage that exists but holds no runs yet is read as empty.
With PostgreSQL the database is the record: a worker leaves nothing in the folder it was
started from, and `status` names no file of another machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import contreact
from contreact.stub import StubServer
from support.backends import Backend
from support.cli import cli_env, cli_in_process
from support.paths import ROOT
from support.runs import write_config

READERS = [
    ["list"],
    ["status", "r1"],
    ["show", "r1"],
    ["memory", "r1"],
    ["export", "r1"],
    ["export", "--batch", "b"],
    ["batch", "--status", "b"],
    ["report", "--batch", "b"],
    ["pei", "--batch", "b", "-e", "stub-model"],
    ["resume", "r1"],
    ["delete", "r1", "--yes"],
]
"""Commands that read runs or change runs that exist: none of them may create a storage."""


def _refused(backend: Backend, named: str) -> None:
    """Every reader exits 2 with one line naming `named`, and says nothing was created."""
    for command in READERS:
        done = cli_in_process(backend, *command)
        assert done.returncode == 2, (command, done.stdout, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1, (command, done.stderr)
        assert named in done.stderr and "nothing was" in done.stderr, (command, done.stderr)


def test_a_mistyped_folder_is_reported_and_nothing_is_made(tmp_path: Path) -> None:
    typo = Backend("sqlite", tmp_path / "rnus")
    _refused(typo, str(tmp_path / "rnus"))
    missing_file = Backend("sqlite", tmp_path / "elsewhere", f"sqlite:///{tmp_path / 'no.db'}")
    _refused(missing_file, str(tmp_path / "no.db"))
    from contreact.errors import StorageNotFoundError

    with pytest.raises(StorageNotFoundError, match=f"no contreact database in {typo.data_dir}"):
        contreact.load(batch="b", storage=typo.data_dir)
    assert list(tmp_path.iterdir()) == []


def test_a_file_without_contreact_tables_is_reported_and_left_as_it_was(tmp_path: Path) -> None:
    import sqlite3

    folder = tmp_path / "notes"
    folder.mkdir()
    with sqlite3.connect(folder / "contreact.db") as conn:
        conn.execute("CREATE TABLE notes (body TEXT)")
    conn.close()
    before = (folder / "contreact.db").read_bytes()
    _refused(Backend("sqlite", folder), "holds no contreact tables")
    assert (folder / "contreact.db").read_bytes() == before
    assert sorted(p.name for p in folder.iterdir()) == ["contreact.db"]


def test_a_storage_that_holds_no_runs_yet_is_read_as_empty(
    tmp_path: Path, sqlite_backend: Backend
) -> None:
    with StubServer().start() as server:
        config = write_config(tmp_path / "c.yaml", sqlite_backend, cycles=1)
        assert (
            cli_in_process(sqlite_backend, "run", str(config), "--host", server.url).returncode == 0
        )
    assert cli_in_process(sqlite_backend, "delete", "run-1", "--yes").returncode == 0
    listed = cli_in_process(sqlite_backend, "list")
    here = f"--storage {sqlite_backend.data_dir}"  # both start their run where `list` looked
    assert (listed.returncode, " ".join(listed.stdout.split())) == (
        0,
        f"No runs yet. Start one with `contreact demo {here}` or `contreact run CONFIG {here}`.",
    )
    assert json.loads(cli_in_process(sqlite_backend, "list", "--json").stdout) == []
    unknown = cli_in_process(sqlite_backend, "status", "run-1")
    assert unknown.returncode == 2 and "no run named run-1" in unknown.stderr


def _public_tables(backend: Backend) -> list[str]:
    import psycopg

    with psycopg.connect(str(backend.db_url).replace("+psycopg", "")) as conn:
        rows = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1"
        ).fetchall()
    return [str(r[0]) for r in rows]


@pytest.mark.postgres
def test_a_database_without_contreact_tables_is_reported_and_nothing_is_made(
    postgres_backend: Backend,
) -> None:
    _refused(postgres_backend, f"{postgres_backend.db_url} holds no contreact tables")
    worker = cli_in_process(postgres_backend, "worker")
    assert worker.returncode == 2, worker.stdout
    assert "holds no contreact tables" in worker.stderr
    assert len(worker.stderr.strip().splitlines()) == 1
    from contreact.errors import StorageNotFoundError

    with pytest.raises(StorageNotFoundError, match="holds no contreact tables"):
        contreact.load(batch="b", storage=postgres_backend.db_url)
    assert _public_tables(postgres_backend) == []


@pytest.mark.postgres
def test_a_worker_on_a_database_with_no_study_queue_says_so(
    tmp_path: Path, postgres_backend: Backend
) -> None:
    with StubServer().start() as server:
        config = write_config(tmp_path / "c.yaml", postgres_backend, cycles=1)
        ran = cli_in_process(postgres_backend, "run", str(config), "--host", server.url)
        assert ran.returncode == 0, ran.stderr
    tables = _public_tables(postgres_backend)
    worker = cli_in_process(postgres_backend, "worker", "--forever")
    assert worker.returncode == 2, worker.stdout
    assert worker.stderr.strip() == (
        f"contreact: database {postgres_backend.db_url} holds no study queue (nothing was "
        f"created in it): put a study on it with `contreact batch CONFIG --no-work --storage "
        f"{postgres_backend.db_url}`, or check the URL"
    )
    assert _public_tables(postgres_backend) == tables


def test_load_from_an_unreachable_database_raises_one_clear_line() -> None:
    from contreact.checkpoints.storage_faults import StorageFault

    with pytest.raises(StorageFault) as caught:
        contreact.load(batch="b", storage="postgresql://postgres@127.0.0.1:9/contreact")
    message = str(caught.value)
    assert message.startswith("database postgresql+psycopg://postgres@127.0.0.1:9/contreact ")
    assert "cannot be reached" in message and "\n" not in message
    assert "OperationalError" not in message and "psycopg" not in message.split(":", 1)[1]
    assert caught.value.__suppress_context__


@pytest.mark.postgres
def test_a_worker_leaves_nothing_in_its_folder_and_status_names_no_file_of_it(
    tmp_path: Path, postgres_backend: Backend
) -> None:
    url = str(postgres_backend.db_url)
    here, cache = tmp_path / "where-the-worker-starts", tmp_path / "cache"
    here.mkdir()
    with StubServer().start() as server:
        study = tmp_path / "study.yaml"
        study.write_text(
            yaml.safe_dump(
                {
                    "batch": "away",
                    "models": ["stub-model"],
                    "replicates": 1,
                    "cycles": 1,
                    "ollama": {"hosts": [server.url]},
                    "similarity": {"enabled": False},
                    "storage": {"url": url},
                }
            ),
            encoding="utf-8",
        )
        queued = cli_in_process(postgres_backend, "batch", str(study), "--no-work")
        assert queued.returncode == 0, queued.stderr
        env = cli_env({"CONTREACT_DB_URL": url, "XDG_CACHE_HOME": str(cache)})
        env.pop("CONTREACT_HOME", None)
        env["PYTHONPATH"] = str(ROOT)
        worker = subprocess.run(
            [sys.executable, "-m", "contreact", "worker"],
            cwd=here,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            stdin=subprocess.DEVNULL,
        )
    assert worker.returncode == 0, worker.stdout + worker.stderr
    assert "away.stub-model.r1: completed" in worker.stdout, worker.stdout
    assert list(here.iterdir()) == []
    kept = cache / "contreact" / f"127.0.0.1-5432-{url.rsplit('/', 1)[1]}"
    assert (kept / "logs" / "away.stub-model.r1.jsonl").is_file()
    assert sorted(p.name for p in (kept / "batches" / "away").iterdir()) == [
        "away.stub-model.r1.out",
        "away.stub-model.r1.yaml",
    ]
    status = cli_in_process(postgres_backend, "status", "away.stub-model.r1", "--json")
    summary = json.loads(status.stdout)
    assert summary["status"] == "completed" and summary["log"] is None
    shown = cli_in_process(postgres_backend, "status", "away.stub-model.r1")
    assert "log" not in shown.stdout and str(tmp_path) not in shown.stdout
    assert (
        str(tmp_path) not in cli_in_process(postgres_backend, "show", "away.stub-model.r1").stdout
    )
    assert os.listdir(here) == []
