"""A batch checks every model on every host, and its storage, before any run starts.

A model that one host lacks would otherwise fail its runs one by one, hours in, with the
reason only in `contreact status`; `contreact doctor BATCH.yaml` makes the same checks.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from contreact.stub import StubServer
from support.backends import Backend
from support.cli import cli_in_process


def _config(path: Path, backend: Backend, hosts: list[str], models: list[str]) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "batch": "pre",
                "models": models,
                "replicates": 2,
                "cycles": 1,
                "ollama": {"hosts": hosts},
                "storage": backend.storage_yaml(),
            }
        ),
        encoding="utf-8",
    )
    return path


def test_a_model_one_host_lacks_stops_the_batch_before_any_run(
    tmp_path: Path, sqlite_backend: Backend
) -> None:
    with (
        StubServer(models=["stub-model", "rare"]).start() as a,
        StubServer(models=["stub-model"]).start() as b,
    ):
        config = _config(
            tmp_path / "b.yaml", sqlite_backend, [a.url, b.url], ["stub-model", "rare"]
        )
        done = cli_in_process(sqlite_backend, "batch", str(config))
        assert done.returncode == 2, done.stdout + done.stderr
        line = done.stderr.strip()
        assert len(line.splitlines()) == 1
        assert "'rare' is not on " + b.url in line and "ollama pull rare" in line
        assert a.requests() == [] and b.requests() == []  # no model was called
        listed = cli_in_process(sqlite_backend, "list", "--json")
        assert listed.stdout.strip() in ("[]", "")

        doctor = cli_in_process(sqlite_backend, "doctor", str(config))
        assert doctor.returncode == 1
        assert "'rare' is not on " + b.url in doctor.stdout
        assert doctor.stdout.count("ok") >= 5  # two hosts, the models they have, the storage


def test_a_host_that_does_not_answer_stops_the_batch(
    tmp_path: Path, sqlite_backend: Backend
) -> None:
    with StubServer(models=["stub-model"]).start() as a:
        gone = StubServer(models=["stub-model"]).start()
        dead = gone.url
        gone.stop()
        config = _config(tmp_path / "b.yaml", sqlite_backend, [a.url, dead], ["stub-model"])
        done = cli_in_process(sqlite_backend, "batch", str(config))
        assert done.returncode == 2
        assert f"cannot reach Ollama at {dead}" in done.stderr
        assert a.requests() == []
