"""Basic-auth credentials in the Ollama host URL are sent to the host, and kept nowhere.

An authenticating proxy in front of Ollama (here: the stub with `basic_auth`, which answers
HTTP 401 to any request without the right `Authorization`) is reached with
`http://user:password@host:port`, as Ollama's own clients take it. The run works, and
neither the password nor its Basic-auth encoding is found in the database, the data
directory (JSONL log), or anything the CLI prints.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import yaml
from sqlalchemy import inspect

from contreact.stub import StubServer
from support.backends import Backend
from support.cli import cli_in_process
from support.runs import write_config

USER, PASSWORD = "alice", "s3cret-pw"
SECRETS = (PASSWORD, base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode())


def everything_stored(backend: Backend) -> str:
    """Every row of every table, and every file of the data directory, as one text."""
    from contreact.checkpoints.engines import engine_for

    engine = engine_for(backend.storage())
    texts = []
    with engine.connect() as conn:
        for name in inspect(engine).get_table_names():
            texts += [
                repr(tuple(row))
                for row in conn.exec_driver_sql(f'SELECT * FROM "{name}"')  # noqa: S608
            ]
    for path in backend.data_dir.rglob("*"):
        if path.is_file():
            texts.append(path.read_bytes().decode("latin-1"))
    return "\n".join(texts)


def test_a_host_behind_basic_auth_works_and_its_password_is_kept_nowhere(
    tmp_path: Path, backend: Backend
) -> None:
    with StubServer(basic_auth=(USER, PASSWORD)).start() as server:
        url = server.url
        host = server.url.replace("://", f"://{USER}:{PASSWORD}@")
        config = write_config(tmp_path / "c.yaml", backend, cycles=2, ollama={"host": host})
        outputs = [cli_in_process(backend, "doctor", str(config))]
        outputs.append(cli_in_process(backend, "run", str(config)))
        statuses = {r["status"] for r in server.requests()}
    assert outputs[-1].returncode == 0, outputs[-1].stderr
    assert statuses == {200}, "every request carried the credentials"
    for command in (
        ["show", "run-1"],
        ["status", "run-1", "--json"],
        ["list"],
        ["export", "run-1"],
    ):
        outputs.append(cli_in_process(backend, *command))
        assert outputs[-1].returncode == 0, (command, outputs[-1].stderr)
    status = json.loads(outputs[-3].stdout)
    assert status["host"] == url  # the host, shown without its credentials
    seen = everything_stored(backend) + "".join(o.stdout + o.stderr for o in outputs)
    assert url in seen
    for secret in SECRETS:
        assert secret not in seen


def test_without_credentials_the_run_stops_with_one_line_and_resume_with_them_completes(
    tmp_path: Path, sqlite_backend: Backend
) -> None:
    with StubServer(basic_auth=(USER, PASSWORD)).start() as server:
        config = write_config(
            tmp_path / "c.yaml", sqlite_backend, cycles=1, ollama={"host": server.url}
        )
        url = server.url
        refused = cli_in_process(sqlite_backend, "run", str(config))
        # The recorded host has no credentials: OLLAMA_HOST (or --host) brings them back.
        env = {"OLLAMA_HOST": server.url.replace("://", f"://{USER}:{PASSWORD}@")}
        resumed = cli_in_process(sqlite_backend, "resume", "run-1", env=env)
    assert refused.returncode == 1
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and "refused access (HTTP 401)" in lines[0], refused.stderr
    assert url in lines[0]
    assert resumed.returncode == 0, resumed.stderr
    assert PASSWORD not in everything_stored(sqlite_backend) + resumed.stdout + resumed.stderr


def test_a_bad_host_in_a_config_is_refused_without_echoing_its_password(
    tmp_path: Path, sqlite_backend: Backend
) -> None:
    config = write_config(
        tmp_path / "c.yaml", sqlite_backend, ollama={"host": f"http://{USER}:{PASSWORD}@h:99999"}
    )
    result = cli_in_process(sqlite_backend, "run", str(config))
    assert result.returncode == 2 and "invalid port" in result.stderr, result.stderr
    assert PASSWORD not in result.stderr


def test_a_batch_hands_the_credentials_to_its_runs_without_writing_them(
    tmp_path: Path, sqlite_backend: Backend
) -> None:
    with StubServer(basic_auth=(USER, PASSWORD)).start() as server:
        host = server.url.replace("://", f"://{USER}:{PASSWORD}@")
        batch = tmp_path / "batch.yaml"
        batch.write_text(
            yaml.safe_dump(
                {"batch": "b", "models": ["stub-model"], "cycles": 1, "ollama": {"host": host}}
            ),
            encoding="utf-8",
        )
        result = cli_in_process(sqlite_backend, "batch", str(batch), "--json")
        statuses = {r["status"] for r in server.requests()}
    assert result.returncode == 0, result.stdout + result.stderr
    assert [r["status"] for r in json.loads(result.stdout)] == ["completed"]
    assert statuses == {200}
    seen = everything_stored(sqlite_backend) + result.stdout + result.stderr
    for secret in SECRETS:
        assert secret not in seen
