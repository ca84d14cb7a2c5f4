"""A database made by the release before migrations is upgraded in place, its runs intact.

`tests/data/previous_release` holds what that release's code made (`make.sh` says how): a
SQLite file and a PostgreSQL dump, each with two finished runs of two cycles. The first
command of this release that opens one adopts it at the baseline revision and upgrades it;
every run reads back as it was, and a run goes on by a cycle.
"""

from __future__ import annotations

import gzip
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import inspect, text

from contreact.checkpoints.migrations import HEAD, VERSION_TABLE
from contreact.stub import StubServer
from support.backends import Backend
from support.cli import cli_in_process
from support.paths import ROOT
from support.runs import write_config

MADE_BEFORE = ROOT / "tests" / "data" / "previous_release"
RUNS = ("old-a", "old-b")

ADDED = {"contreact_operator_replies", "contreact_pei_repeats"}
"""The tables that revisions after the previous release add (0003: replies and PEI repeats)."""


def _restore(backend: Backend) -> None:
    """Put the previous release's database where `backend` looks."""
    if backend.db_url is None:
        backend.data_dir.mkdir(parents=True)
        db = backend.data_dir / "contreact.db"
        db.write_bytes(gzip.decompress((MADE_BEFORE / "contreact.db.gz").read_bytes()))
        return
    import psycopg

    dump = gzip.decompress((MADE_BEFORE / "postgres.sql.gz").read_bytes()).decode()
    # pg_dump's plain SQL, less psql's own commands (`\restrict`): any client replays it.
    sql = "\n".join(line for line in dump.splitlines() if not line.startswith("\\"))
    with psycopg.connect(backend.db_url.replace("+psycopg", ""), autocommit=True) as conn:
        conn.execute(sql.encode())


def _as_stored(backend: Backend) -> dict[str, Any]:
    """What the runs hold, read by SQL (not by contreact): cycles and memory per run."""
    from sqlalchemy import create_engine

    url = backend.db_url or f"sqlite:///{backend.data_dir / 'contreact.db'}"
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            cycles = conn.execute(
                text("SELECT run_id, cycle, reflection FROM contreact_cycles ORDER BY 1, 2")
            ).all()
            memory = conn.execute(
                text("SELECT run_id, key, value FROM contreact_memories ORDER BY 1, 2")
            ).all()
            events = conn.execute(
                text("SELECT run_id, count(*) FROM contreact_events GROUP BY run_id ORDER BY 1")
            ).all()
            tables = set(inspect(conn).get_table_names())
    finally:
        engine.dispose()
    return {
        "cycles": [tuple(r) for r in cycles],
        "memory": [tuple(r) for r in memory],
        "events": [tuple(r) for r in events],
        "tables": tables,
    }


def test_the_made_databases_are_the_previous_release_s(tmp_path: Path) -> None:
    _restore(Backend("sqlite", tmp_path / "runs"))
    db = sqlite3.connect(tmp_path / "runs" / "contreact.db")
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    db.close()
    assert "contreact_schema" in tables and VERSION_TABLE not in tables
    dump = gzip.decompress((MADE_BEFORE / "postgres.sql.gz").read_bytes()).decode()
    assert "CREATE TABLE public.contreact_schema" in dump and VERSION_TABLE not in dump


def test_a_previous_release_s_database_is_upgraded_with_its_runs_intact(
    tmp_path: Path, backend: Backend
) -> None:
    _restore(backend)
    before = _as_stored(backend)
    assert [r for r, _, _ in before["cycles"]] == ["old-a", "old-a", "old-b", "old-b"]

    listed = cli_in_process(backend, "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [(r["run_id"], r["status"], r["cycles_done"]) for r in json.loads(listed.stdout)] == [
        ("old-a", "completed", 2),
        ("old-b", "completed", 2),
    ]
    shown = cli_in_process(backend, "show", "old-b", "--json")
    assert shown.returncode == 0, shown.stderr
    assert [(c["cycle"], c["reflection"]) for c in json.loads(shown.stdout)] == [
        (c, r) for run, c, r in before["cycles"] if run == "old-b"
    ]
    after = _as_stored(backend)
    assert {k: v for k, v in after.items() if k != "tables"} == {
        k: v for k, v in before.items() if k != "tables"
    }
    assert after["tables"] == (before["tables"] - {"contreact_schema"}) | {VERSION_TABLE} | ADDED
    from contreact.checkpoints.engines import dispose_engines, engine_for

    with engine_for(backend.storage()).connect() as conn:
        assert conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalar() == HEAD
    dispose_engines()

    remembered = {k: v for run, k, v in before["memory"] if run == "old-a"}
    memory = json.loads(cli_in_process(backend, "memory", "old-a", "--json").stdout)
    assert memory == remembered

    # A run of the old release goes on, from its checkpoint, journal and memory: as a run
    # made with three cycles by this release does.
    with StubServer().start() as server:
        extended = cli_in_process(
            backend, "resume", "old-a", "--cycles", "1", "--host", server.url, "-q"
        )
        config = write_config(
            tmp_path / "fresh.yaml",
            backend,
            run_id="fresh",
            cycles=3,
            ollama={"host": server.url},
            similarity={"embedding_model": "stub-embed"},
        )
        fresh = cli_in_process(backend, "run", str(config), "-q")
    assert extended.returncode == 0, extended.stderr
    assert fresh.returncode == 0, fresh.stderr
    cycles = json.loads(cli_in_process(backend, "show", "old-a", "--json").stdout)
    assert [(c["cycle"], c["reflection"]) for c in cycles[:2]] == [
        (c, r) for run, c, r in before["cycles"] if run == "old-a"
    ]
    made_now = json.loads(cli_in_process(backend, "show", "fresh", "--json").stdout)
    # The stub's wording has since come to depend on the temperature too, so the two cycles
    # the old release wrote read differently from this release's; the cycle added now must not.
    assert len(cycles) == len(made_now) == 3
    assert cycles[2]["reflection"] == made_now[2]["reflection"]
    went_on = json.loads(cli_in_process(backend, "memory", "old-a", "--json").stdout)
    made = json.loads(cli_in_process(backend, "memory", "fresh", "--json").stdout)
    assert sorted(went_on) == sorted(made)
    assert went_on["topic-3"] == made["topic-3"]


@pytest.mark.parametrize("command", [["list"], ["show", "old-a"], ["export", "old-a"]])
def test_an_upgrade_by_any_command_leaves_the_database_usable(
    tmp_path: Path, sqlite_backend: Backend, command: list[str]
) -> None:
    _restore(sqlite_backend)
    done = cli_in_process(sqlite_backend, *command)
    assert done.returncode == 0, done.stderr
    assert cli_in_process(sqlite_backend, "status", "old-b").returncode == 0
