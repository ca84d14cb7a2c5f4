"""A batch checks every model on every host, and its storage, before any run starts.

A model that one host lacks would otherwise fail its runs one by one, hours in, with the
reason only in `contreact status`; `contreact doctor BATCH.yaml` makes the same checks.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import yaml

from contreact.stub import StubServer
from support.backends import Backend
from support.cli import cli_env, cli_in_process
from support.paths import ROOT


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


def test_no_host_answering_stops_the_batch(tmp_path: Path, sqlite_backend: Backend) -> None:
    gone = StubServer(models=["stub-model"]).start()
    dead = gone.url
    gone.stop()
    config = _config(tmp_path / "b.yaml", sqlite_backend, [dead], ["stub-model"])
    done = cli_in_process(sqlite_backend, "batch", str(config))
    assert done.returncode == 2
    assert f"cannot reach Ollama at {dead}" in done.stderr
    # One host down while another answers only warns: its runs move (test_scale_e2e).


def test_batch_status_lists_every_run_of_the_study_queued_included(
    tmp_path: Path, sqlite_backend: Backend
) -> None:
    with StubServer(models=["stub-model"], latency_ms=300).start() as server:
        config = _config(tmp_path / "b.yaml", sqlite_backend, [server.url], ["stub-model"])
        data = yaml.safe_load(config.read_text(encoding="utf-8"))
        config.write_text(yaml.safe_dump({**data, "replicates": 3, "parallel": 1}))
        proc = subprocess.Popen(
            [sys.executable, "-m", "contreact", *sqlite_backend.cli_args, "batch", str(config)],
            cwd=ROOT,
            env=cli_env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 60
            rows: list[dict[str, object]] = []
            while time.monotonic() < deadline:
                shown = cli_in_process(sqlite_backend, "batch", "--status", "pre", "--json")
                rows = json.loads(shown.stdout) if shown.returncode == 0 else []
                if any(r["status"] == "running" and r["driver"] for r in rows):
                    break
                time.sleep(0.2)
            assert [r["run_id"] for r in rows] == [
                "pre.stub-model.r1",
                "pre.stub-model.r2",
                "pre.stub-model.r3",
            ]
            assert [r["status"] for r in rows] == ["running", "queued", "queued"], rows
            assert rows[0]["host"] == server.url and rows[1]["host"] == ""
            table = cli_in_process(sqlite_backend, "batch", "--status", "pre")
            assert "queued" in table.stdout and f"{server.url}: 1 running" in table.stdout
        finally:
            proc.kill()
            proc.wait()
