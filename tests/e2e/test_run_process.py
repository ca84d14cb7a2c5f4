"""A batch's run processes are forked from a fork server, yet each lives by its own settings.

The fork server imports the engine once, with the environment of the moment it starts. A
run process is handed its own environment, and every setting is read when used, not when
imported: a failpoint armed for one run process fires there and only there.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import yaml

from contreact.engine.child import RunRequest
from contreact.stub import StubServer
from contreact.studies.fork_server import RunProcess
from support.backends import Backend


def test_a_run_process_lives_by_its_own_failpoints(tmp_path: Path, sqlite_backend: Backend) -> None:
    with StubServer().start() as server:

        def run(run_id: str, **env: str) -> int:
            config = tmp_path / f"{run_id}.yaml"
            config.write_text(
                yaml.safe_dump(
                    {
                        "run_id": run_id,
                        "model": "stub-model",
                        "cycles": 1,
                        "ollama": {"host": server.url},
                        "operator": {"mode": "auto", "no_reply": True},
                    }
                ),
                encoding="utf-8",
            )
            log = tmp_path / f"{run_id}.out"
            request = RunRequest(run_id, sqlite_backend.storage(), config_file=config)
            return RunProcess(request, {**os.environ, **env}, log).wait()

        assert run("plain") == 0  # starts the fork server, no failpoint armed
        armed = run("armed", CONTREACT_FAILPOINTS="after-commit:c1:s0:llm")
        assert armed == -signal.SIGKILL
        assert run("plain-again") == 0  # the next one is not armed
        log = (tmp_path / "plain.out").read_text(encoding="utf-8")
        assert "cycle 1 reflection: " in log and "run plain completed" in log
