"""Runs started together on a new storage all complete: the schema is made once, under a lock.

Four `contreact run` at once on a fresh data folder once failed one run in twenty with
`table contreact_runs already exists`: each process read that the tables were missing, and
more than one created them. Now each upgrade runs under a lock (an advisory lock on
PostgreSQL, an exclusive transaction on SQLite) and reads the version again under it; so
does LangGraph's own setup of its checkpoint tables. Eight one-cycle runs start at the same
moment (processes forked from one that imported the engine, released by a barrier) on a
new SQLite file and on a new PostgreSQL database, ten times each.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import text

from contreact.stub import StubServer
from support.backends import Backend, postgres_database
from support.cli import cli_env
from support.forked import run_together
from support.runs import write_config
from support.stub import scripted_stub

TRIALS = 10
RUNS = 8


@pytest.fixture
def answers() -> Iterator[StubServer]:
    """A model that ends each run's one cycle with its first answer: the runs are short."""
    with scripted_stub({1: [{"content": "Reflection: started with the others."}]}) as server:
        yield server


@contextmanager
def _fresh(kind: str, folder: Path) -> Iterator[Backend]:
    if kind == "sqlite":
        yield Backend("sqlite", folder / "runs")
        return
    with postgres_database(folder / "runs") as backend:
        yield backend


def _completed(backend: Backend) -> list[tuple[str, str]]:
    from contreact.checkpoints.engines import dispose_engines, engine_for

    try:
        with engine_for(backend.storage().existing()).connect() as conn:
            rows = conn.execute(text("SELECT run_id, status FROM contreact_runs")).all()
    finally:
        dispose_engines()
    return sorted((str(r), str(s)) for r, s in rows)


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_eight_runs_started_at_once_on_a_new_storage_all_complete(
    tmp_path: Path, kind: str, request: pytest.FixtureRequest
) -> None:
    if kind == "postgres":
        request.getfixturevalue("postgres_backend")  # skips (or fails in CI) without a server
    stub = request.getfixturevalue("answers")
    failures: list[str] = []
    began = time.monotonic()
    for trial in range(TRIALS):
        folder = tmp_path / f"trial-{trial}"
        folder.mkdir()
        with _fresh(kind, folder) as backend:
            commands = [
                [
                    *backend.cli_args,
                    "run",
                    str(
                        write_config(
                            folder / f"r{i}.yaml",
                            backend,
                            run_id=f"r{i}",
                            cycles=1,
                            ollama={"host": stub.url},
                            similarity={"enabled": False},
                        )
                    ),
                    "-q",
                ]
                for i in range(RUNS)
            ]
            ended = run_together(commands, cli_env(), folder)
            failures += [f"trial {trial}: exit {e.code}: {e.output}" for e in ended if e.code != 0]
            completed = _completed(backend)
            if completed != [(f"r{i}", "completed") for i in range(RUNS)]:
                failures.append(f"trial {trial}: the registry holds {completed}")
    took = time.monotonic() - began
    print(
        f"\nfirst starts on {kind}: {TRIALS} trials x {RUNS} runs at once, "
        f"{len(failures)} failures, {took:.1f} s"
    )
    assert failures == []
