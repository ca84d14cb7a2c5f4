"""kill -9 at many points, resume each time: the result equals an uninterrupted run.

Failpoints (`CONTREACT_FAILPOINTS`) SIGKILL the process in the narrow windows that matter:
inside a tool's transaction, after a side effect committed but before its checkpoint,
after an operator reply was journaled, between cycles, on a `write` and a `delete`. One
more kill comes from outside, while a model call is in flight at the stub. Model requests
(at the stub) and tool executions (`CONTREACT_TALLY_FILE`) are counted: after the kills and
resumes they equal the uninterrupted run's plus only what was in flight at a kill.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections import Counter
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from contreact.stub import StubServer
from support.backends import Backend, postgres_database
from support.cli import cli, cli_in_process, cli_start, kill_when
from support.once import as_json, once_per_session
from support.runs import outcome, read_log, write_config

KILLS = [
    ("run", "after-commit:c1:s1:t0"),  # a tool's result committed, its checkpoint not written
    ("resume", "before-commit:c1:s2:t0"),  # inside a tool's transaction
    ("resume", "after-commit:c2:s3:t0"),  # the operator's reply journaled
    ("resume", "after-append:c2:end"),  # between cycles: cycle 2 closed, cycle 3 not begun
    ("resume", "model-call"),  # from outside, while the stub holds a model call
    ("resume", "after-commit:c3:s2:llm"),  # a model answer journaled, not checkpointed
    ("resume", "before-commit:c3:s3:t0"),  # inside a `delete`'s transaction
    ("resume", "after-commit:c3:s3:t0"),  # a `delete` committed, its checkpoint not written
    ("resume", "after-commit:c4:s0:t0"),  # a `write` committed, its checkpoint not written
]
IN_FLIGHT_TOOLS = 2
"""Kills inside a tool's transaction: the tool ran, rolled back, and runs again."""


def bodies(requests: list[dict[str, Any]]) -> Counter[str]:
    return Counter(json.dumps(r["body"], sort_keys=True) for r in requests)


def tallied(path: Path) -> Counter[str]:
    return Counter(path.read_text(encoding="utf-8").split())


def uninterrupted(backend: Backend, folder: Path) -> dict[str, Any]:
    """The run the crashed ones must equal: its outcome, model requests and tool calls."""
    tally = folder / "ref.tally"
    with StubServer().start() as server:
        reference = write_config(
            folder / "ref.yaml", backend, run_id="ref", cycles=4, ollama={"host": server.url}
        )
        done = cli(backend, "run", str(reference), env={"CONTREACT_TALLY_FILE": str(tally)})
        assert done.returncode == 0, done.stderr
        reflections, memory, events = outcome(backend, "ref")
        return {
            "outcome": [reflections, memory, events],
            "requests": sorted(bodies(server.requests()).elements()),
            "tools": tally.read_text(encoding="utf-8").split(),
        }


@pytest.fixture
def reference(backend: Backend, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The uninterrupted run on this backend, made once for every test that compares with it."""

    def make(folder: Path) -> dict[str, Any]:
        if backend.db_url is None:
            return uninterrupted(Backend("sqlite", folder / "runs"), folder)
        with postgres_database(folder / "runs") as own:
            return uninterrupted(own, folder)

    return once_per_session(tmp_path_factory, f"uninterrupted-{backend.name}", make)  # type: ignore[no-any-return]


@pytest.mark.parametrize("policy", ["cycle", "step"])
def test_kill_and_resume_equals_uninterrupted(
    tmp_path: Path, backend: Backend, policy: str, reference: dict[str, Any]
) -> None:
    """In both checkpoint policies (`persistence.checkpoints`)."""
    ran_crash = tmp_path / "crash.tally"
    expected_requests = Counter(reference["requests"])
    ran_ref = Counter(reference["tools"])
    with StubServer().start() as server:
        sent: list[dict[str, Any]] = []  # requests of the crashed run, across stub resets

        crashed = write_config(
            tmp_path / "crash.yaml",
            backend,
            run_id="crash",
            cycles=4,
            ollama={"host": server.url},
            persistence={"checkpoints": policy},
        )
        env = {"CONTREACT_TALLY_FILE": str(ran_crash)}
        for command, point in KILLS:
            args = ["run", str(crashed)] if command == "run" else ["resume", "crash"]
            if point == "model-call":
                seen = len(server.requests())
                server.add_faults({"kind": "delay", "seconds": 60})
                proc = cli_start(backend, *args, env=env)
                kill_when(proc, lambda seen=seen: len(server.requests()) > seen)
                held = server.requests()[-1]["body"]
                sent += server.requests()
                server.reset(faults=True)
                assert proc.returncode == -9
                continue
            result = cli(backend, *args, env={**env, "CONTREACT_FAILPOINTS": point})
            assert result.returncode == -9, (
                f"{point} was not reached: {result.stderr}{result.stdout}"
            )
        finished = cli(backend, "resume", "crash", env=env)
        assert finished.returncode == 0, finished.stderr
        # Every model request of the uninterrupted run, and only the one killed in flight
        # again, byte for byte (the prompt cache stays warm): nothing answered was re-asked.
        sent += server.requests()
        assert bodies(sent) == expected_requests + Counter([json.dumps(held, sort_keys=True)])

    # Tools ran as often as in the uninterrupted run, plus the ones killed mid-transaction.
    ran = tallied(ran_crash)
    assert sum(ran.values()) == sum(ran_ref.values()) + IN_FLIGHT_TOOLS, ran
    assert ran - ran_ref == Counter({"tool:pattern_search": 1, "tool:delete": 1})
    reflections, memory, events = as_json(outcome(backend, "crash"))
    expected = reference["outcome"]
    assert reflections == expected[0]
    assert memory == expected[1]
    assert events == expected[2], "events differ from the uninterrupted run"
    kinds = [e[1] for e in events]
    assert kinds.count("CYCLE_END") == 4 and kinds.count("OPERATOR_MESSAGE") == 1
    status = json.loads(cli_in_process(backend, "status", "crash", "--json").stdout)
    assert status["status"] == "completed"


def test_resume_before_first_checkpoint_starts_fresh(
    tmp_path: Path, sqlite_backend: Backend
) -> None:
    """A run killed before its first checkpoint has no state: resume starts it."""
    backend = sqlite_backend
    with StubServer().start() as server:
        config = write_config(
            tmp_path / "c.yaml", backend, run_id="early", cycles=1, ollama={"host": server.url}
        )
        server.add_faults({"kind": "delay", "seconds": 60})
        proc = cli_start(backend, "run", str(config))
        kill_when(proc, lambda: len(server.requests()) > 0)
        server.reset(faults=True)
        result = cli(backend, "resume", "early")
    assert result.returncode == 0, result.stderr
    assert [e["event_type"] for e in read_log(backend, "early")].count("RUN_START") == 1


def test_a_reader_closing_the_database_never_takes_a_running_runs_commits(
    tmp_path: Path, sqlite_backend: Backend
) -> None:
    """A reader that opens and closes the SQLite file while a run is driven sees its commits.

    (`status`, a notebook, a backup.) Nor may it delete the write-ahead log the run writes
    to, which SQLite does when it thinks itself the last connection: a kill after that
    would lose every commit since.
    """
    backend = sqlite_backend
    with StubServer().start() as server:
        config = write_config(
            tmp_path / "c.yaml", backend, run_id="seen", cycles=3, ollama={"host": server.url}
        )
        # Five answers at once, then the sixth call is held while we look.
        server.add_faults(
            *[{"kind": "delay", "seconds": 0.01}] * 5, {"kind": "delay", "seconds": 60}
        )
        proc = cli_start(backend, "run", str(config))
        deadline = time.monotonic() + 60
        while len(server.requests()) < 6 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(server.requests()) == 6, "the run never reached its sixth model call"
        db = backend.storage().sqlite_path
        with closing(sqlite3.connect(db)) as reader:
            (seen,) = reader.execute(
                "SELECT count(*) FROM contreact_events WHERE run_id = 'seen'"
            ).fetchone()
        logged = len(read_log(backend, "seen"))
        assert seen == logged > 5, (seen, logged)
        # The run's own connections still hold their locks: its log was not checkpointed away.
        assert Path(f"{db}-wal").exists()
        kill_when(proc, lambda: True)
        server.reset(faults=True)
        with closing(sqlite3.connect(db)) as reader:
            (kept,) = reader.execute(
                "SELECT count(*) FROM contreact_events WHERE run_id = 'seen'"
            ).fetchone()
        assert kept >= seen
        assert cli(backend, "resume", "seen").returncode == 0
