"""A batch's run processes are forked from a fork server, yet each lives by its own settings.

The fork server imports the engine once, with the environment of the moment it starts;
settings read at import (failpoints, the tally file, SQLite's busy timeout) would then be
the first run's for every later one. A run process whose environment differs in them
starts afresh instead, so a failpoint armed for one run process fires there and only there.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import yaml

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
            args = [*sqlite_backend.cli_args, "run", str(config), "--quiet"]
            return RunProcess(args, {**os.environ, **env}, log).wait()

        assert run("plain") == 0  # starts the fork server, no failpoint armed
        armed = run("armed", CONTREACT_FAILPOINTS="after-commit:c1:s0:llm")
        assert armed == -signal.SIGKILL
        assert run("plain-again") == 0  # the next one is not armed
