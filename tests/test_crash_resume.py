"""kill -9 at many points, resume each time: the result equals an uninterrupted run.

Failpoints (`CONTREACT_FAILPOINTS`) SIGKILL the process in the narrow windows that matter:
inside a tool's transaction, after a side effect committed but before its checkpoint,
after an operator reply was journaled, between cycles. One more kill comes from outside,
while a model call is in flight at the stub.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import Backend, cli, cli_start, kill_when, outcome, read_log, write_config
from contreact.stub import StubServer

KILLS = [
    ("run", "after-commit:c1:s1:t0"),  # a tool's result committed, its checkpoint not written
    ("resume", "before-commit:c1:s2:t0"),  # inside a tool's transaction
    ("resume", "after-commit:c2:s3:t0"),  # the operator's reply journaled
    ("resume", "after-append:c2:end"),  # between cycles: cycle 2 closed, cycle 3 not begun
    ("resume", "model-call"),  # from outside, while the stub holds a model call
    ("resume", "after-commit:c3:s2:llm"),  # a model answer journaled, not checkpointed
]


@pytest.mark.slow
def test_kill_and_resume_equals_uninterrupted(tmp_path: Path, backend: Backend) -> None:
    with StubServer().start() as server:
        reference = write_config(
            tmp_path / "ref.yaml", backend, run_id="ref", cycles=4, ollama={"host": server.url}
        )
        done = cli(backend, "run", str(reference))
        assert done.returncode == 0, done.stderr
        expected = outcome(backend, "ref")

        crashed = write_config(
            tmp_path / "crash.yaml", backend, run_id="crash", cycles=4, ollama={"host": server.url}
        )
        for command, point in KILLS:
            args = ["run", str(crashed)] if command == "run" else ["resume", "crash"]
            if point == "model-call":
                seen = len(server.requests())
                server.add_faults({"kind": "delay", "seconds": 60})
                proc = cli_start(backend, *args)
                kill_when(proc, lambda seen=seen: len(server.requests()) > seen)
                held = server.requests()[-1]["body"]
                server.reset(faults=True)
                assert proc.returncode == -9
                continue
            result = cli(backend, *args, env={"CONTREACT_FAILPOINTS": point})
            assert result.returncode == -9, (
                f"{point} was not reached: {result.stderr}{result.stdout}"
            )
        finished = cli(backend, "resume", "crash")
        assert finished.returncode == 0, finished.stderr
        # The call killed in flight was sent again byte for byte (prompt cache stays warm).
        assert any(r["body"] == held for r in server.requests())

    reflections, memory, events = outcome(backend, "crash")
    assert reflections == expected[0]
    assert memory == expected[1]
    assert events == expected[2], "events differ from the uninterrupted run"
    kinds = [e[1] for e in events]
    assert kinds.count("CYCLE_END") == 4 and kinds.count("OPERATOR_MESSAGE") == 1
    status = json.loads(cli(backend, "status", "crash", "--json").stdout)
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
