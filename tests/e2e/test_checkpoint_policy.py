"""`persistence.checkpoints`: `cycle` saves one checkpoint per cycle, `step` one per step.

Both drive the same run: the same model requests, events, memory and reflections. What
differs is only how much history is kept (and so what Studio's time travel can reach).
The crash tests (`test_crash_resume.py`) run in both policies.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from contextlib import closing
from pathlib import Path

from contreact.stub import StubServer
from support.backends import Backend
from support.cli import cli, cli_in_process, cli_start, kill_when
from support.runs import outcome, write_config


def checkpoints_of(backend: Backend, run_id: str) -> int:
    status = json.loads(cli_in_process(backend, "status", run_id, "--json").stdout)
    with closing(sqlite3.connect(backend.storage().sqlite_path)) as conn:
        (count,) = conn.execute(
            "SELECT count(*) FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ''",
            (status["thread_id"],),
        ).fetchone()
    return int(count)


def test_cycle_policy_saves_once_per_cycle_and_runs_the_same(
    tmp_path: Path, sqlite_backend: Backend
) -> None:
    backend = sqlite_backend
    sent: dict[str, Counter[str]] = {}
    with StubServer().start() as server:
        for policy in ("step", "cycle"):
            config = write_config(
                tmp_path / f"{policy}.yaml",
                backend,
                run_id=policy,
                cycles=3,
                ollama={"host": server.url},
                persistence={"checkpoints": policy},
            )
            done = cli_in_process(backend, "run", str(config))
            assert done.returncode == 0, done.stderr
            sent[policy] = Counter(json.dumps(r["body"], sort_keys=True) for r in server.requests())
            server.reset()

    # The end of each cycle; and the simulated agent messages the operator in cycle 2: its
    # pause, then (the reply is only safe once saved) each step up to that cycle's end.
    assert 3 < checkpoints_of(backend, "cycle") <= 3 + 1 + 6
    steps = sum(sent["step"].values())
    assert checkpoints_of(backend, "step") > 3 * steps  # several per model call
    # Stored compressed: each checkpoint repeats every channel's value and version.
    with closing(sqlite3.connect(backend.storage().sqlite_path)) as conn:
        kinds = Counter(t for (t,) in conn.execute("SELECT type FROM checkpoints"))
        assert kinds["msgpack+zlib"] >= 0.9 * sum(kinds.values()), kinds
        # The saver's writes are keyed rows stored once (no rowid table plus key index),
        # in pages that hold several compressed checkpoints.
        (writes,) = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'writes'").fetchone()
        assert "WITHOUT ROWID" in writes
        assert conn.execute("PRAGMA page_size").fetchone() == (8192,)
    assert sent["cycle"] == sent["step"]
    assert outcome(backend, "cycle") == outcome(backend, "step")


def test_an_unknown_policy_is_refused_with_the_choices(
    tmp_path: Path, sqlite_backend: Backend
) -> None:
    config = write_config(
        tmp_path / "bad.yaml", sqlite_backend, persistence={"checkpoints": "every-step"}
    )
    refused = cli_in_process(sqlite_backend, "run", str(config))
    assert refused.returncode == 2
    assert "persistence.checkpoints" in refused.stderr
    assert "'step' or 'cycle'" in refused.stderr, refused.stderr


def test_an_extension_killed_before_its_first_checkpoint_resumes(
    tmp_path: Path, sqlite_backend: Backend
) -> None:
    """The cycle that extends a completed run is saved at once, so a kill cannot lose it."""
    backend = sqlite_backend
    with StubServer().start() as server:
        config = write_config(
            tmp_path / "ext.yaml", backend, run_id="ext", cycles=1, ollama={"host": server.url}
        )
        assert cli_in_process(backend, "run", str(config)).returncode == 0
        seen = len(server.requests())
        server.add_faults({"kind": "delay", "seconds": 60})
        proc = cli_start(backend, "resume", "ext", "--cycles", "1")
        kill_when(proc, lambda: len(server.requests()) > seen)
        server.reset(faults=True)
        resumed = cli(backend, "resume", "ext")
    assert resumed.returncode == 0, resumed.stderr + resumed.stdout
    cycles, _memory, events = outcome(backend, "ext")
    assert [c[0] for c in cycles] == [1, 2]
    assert [e[1] for e in events].count("CYCLE_START") == 2
