"""A researcher's real setup: host forms, models without tool support, option typos.

Each case here broke on a first contact with a real Ollama installation; each runs the CLI
against the stub over real HTTP through ChatOllama.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from contreact.ollama.hosts import resolve_host
from contreact.stub import StubServer
from support.backends import Backend
from support.cli import cli, cli_in_process, cli_start, kill_when
from support.runs import write_config

# Host settings as people write them (Ollama's docs, `OLLAMA_HOST` in systemd units and
# docker-compose files), with what the `ollama` Python client makes of each.
HOST_FORMS = [
    "",
    "0.0.0.0",
    "127.0.0.1",
    "localhost",
    ":11435",
    "127.0.0.1:11435",
    "0.0.0.0:11434",
    "http://127.0.0.1",
    "https://ollama.example.org",
    "http://localhost:11434/",
    "ollama.example.org:8080/ollama/",
    "https://ollama.example.org:8443/api-proxy",
    "[::1]",
    "[::1]:11435",
    "http://[fe80::1]:80",
]


@pytest.mark.parametrize("form", HOST_FORMS)
def test_host_resolution_equals_the_ollama_client(form: str) -> None:
    from ollama._client import _parse_host

    assert resolve_host(form) == _parse_host(form)


def test_bare_ollama_host_runs_and_resume_keeps_the_runs_host(
    tmp_path: Path, sqlite_backend: Backend
) -> None:
    # OLLAMA_HOST without a scheme (the form Ollama's own docs use) reaches the server.
    with StubServer().start() as first, StubServer().start() as second:
        config = write_config(tmp_path / "c.yaml", sqlite_backend, cycles=2)
        bare = f"127.0.0.1:{first.port}"
        done = cli(sqlite_backend, "run", str(config), env={"OLLAMA_HOST": bare})
        assert done.returncode == 0, done.stderr
        assert len(first.requests()) > 0
        status = json.loads(cli_in_process(sqlite_backend, "status", "run-1", "--json").stdout)
        assert status["host"] == f"http://127.0.0.1:{first.port}"

        # The shell now points at another server: the run continues where it began.
        before = len(first.requests())
        other = {"OLLAMA_HOST": f"127.0.0.1:{second.port}"}
        extended = cli(sqlite_backend, "resume", "run-1", "--cycles", "3", env=other)
        assert extended.returncode == 0, extended.stderr
        assert len(first.requests()) > before
        assert second.requests() == []

        # An explicit --host moves it, and the log says so.
        moved = cli_in_process(
            sqlite_backend, "resume", "run-1", "--cycles", "4", "--host", f":{second.port}"
        )
        assert moved.returncode == 0, moved.stderr
        assert len(second.requests()) > 0
        log = [
            json.loads(line)
            for line in (sqlite_backend.data_dir / "logs" / "run-1.jsonl").read_text().splitlines()
        ]
        changes = [e["payload"] for e in log if e["event_type"] == "HOST_CHANGE"]
        assert changes == [
            {"from": f"http://127.0.0.1:{first.port}", "to": f"http://127.0.0.1:{second.port}"}
        ]


def _memory(backend: Backend, run_id: str) -> dict[str, str]:
    from contreact.checkpoints.engines import engine_for
    from contreact.tools.memory import memory_snapshot

    return memory_snapshot(engine_for(backend.storage()), run_id)


@pytest.mark.parametrize(
    ("capabilities", "mode"),
    [(["completion"], "auto"), (["completion", "tools"], "text")],
    ids=["no-tools-capability-auto", "tools-capable-forced-text"],
)
def test_text_tool_mode_runs_three_cycles_with_memory(
    tmp_path: Path, backend: Backend, capabilities: list[str], mode: str
) -> None:
    with StubServer(models=[]).start() as server:
        server.add_model("gemma3:4b", capabilities=capabilities)
        config = write_config(tmp_path / "c.yaml", backend, model="gemma3:4b", tools=mode)
        done = cli_in_process(backend, "run", str(config), "--host", server.url)
        assert done.returncode == 0, done.stderr + done.stdout
        chats = server.requests()
        # ChatOllama always sends a `tools` list; an empty one is what Ollama accepts from
        # a model without the capability (it checks `len(req.Tools) > 0`).
        assert chats and all(not r["body"].get("tools") for r in chats)
        system = chats[0]["body"]["messages"][0]["content"]
        assert "<tool_call>" in system and "- pattern_search(" in system
        # Tool results reach the model as user turns, never as role `tool`.
        roles = {m["role"] for r in chats for m in r["body"]["messages"]}
        assert "tool" not in roles
        # The simulated agent's plan: write topic-c each cycle, delete topic-1 in cycle 3.
        assert sorted(_memory(backend, "run-1")) == ["topic-2", "topic-3"]
        log = [
            json.loads(line)
            for line in (backend.data_dir / "logs" / "run-1.jsonl").read_text().splitlines()
        ]
        start = next(e for e in log if e["event_type"] == "RUN_START")
        assert start["payload"]["tools"]["mode"] == "text"
        assert [e["cycle_number"] for e in log if e["event_type"] == "CYCLE_END"] == [1, 2, 3]


def test_auto_mode_switches_to_text_on_does_not_support_tools(
    tmp_path: Path, sqlite_backend: Backend
) -> None:
    # A server that does not report capabilities (older Ollama) but refuses `tools`.
    with StubServer(models=[]).start() as server:
        server.add_model("phi4", capabilities=["completion"])
        server.hide_capabilities = True
        config = write_config(tmp_path / "c.yaml", sqlite_backend, model="phi4", cycles=2)
        done = cli_in_process(sqlite_backend, "run", str(config), "--host", server.url)
        assert done.returncode == 0, done.stderr + done.stdout
        chats = server.requests()
        assert chats[0]["body"]["tools"]  # the one refused request
        assert chats[0]["status"] == 400
        assert all(not r["body"].get("tools") for r in chats[1:])
        assert sorted(_memory(sqlite_backend, "run-1")) == ["topic-1", "topic-2"]


def test_model_option_typos_are_errors(tmp_path: Path, sqlite_backend: Backend) -> None:
    config = write_config(
        tmp_path / "c.yaml", sqlite_backend, model_options={"num_cxt": 1, "temprature": 0.2}
    )
    done = cli_in_process(sqlite_backend, "run", str(config))
    assert done.returncode == 2
    line = done.stderr.strip()
    assert "`num_cxt` (did you mean `num_ctx`?)" in line
    assert "`temprature` (did you mean `temperature`?)" in line
    assert str(config) in line and len(line.splitlines()) == 1

    hot = write_config(tmp_path / "h.yaml", sqlite_backend, model_options={"temperature": "hot"})
    done = cli_in_process(sqlite_backend, "run", str(hot))
    assert done.returncode == 2
    assert "`temperature` must be a number (got 'hot')" in done.stderr


def test_option_table_matches_the_ollama_client() -> None:
    from ollama._types import Options

    from contreact.ollama.options import OLLAMA_OPTIONS

    assert set(Options.model_fields) <= set(OLLAMA_OPTIONS)


def test_killed_run_is_interrupted_within_seconds_and_resumes(
    tmp_path: Path, sqlite_backend: Backend
) -> None:
    with StubServer(latency_ms=300).start() as server:
        config = write_config(tmp_path / "c.yaml", sqlite_backend, cycles=2)
        proc = cli_start(sqlite_backend, "run", str(config), "--host", server.url)
        kill_when(proc, lambda: len(server.requests()) >= 2)
        killed = time.monotonic()
        while True:
            status = json.loads(cli_in_process(sqlite_backend, "status", "run-1", "--json").stdout)
            if status["status"] == "interrupted":
                break
            assert status["status"] == "running"
            assert time.monotonic() - killed < 5, "a killed run still shows as running"
            time.sleep(0.2)
        assert "contreact resume run-1" in status["reason"]
        listed = json.loads(cli_in_process(sqlite_backend, "list", "--json").stdout)
        assert [(r["status"], r["cycles_planned"]) for r in listed] == [("interrupted", 2)]

        done = cli_in_process(sqlite_backend, "resume", "run-1")
        assert done.returncode == 0, done.stderr
        listed = json.loads(cli_in_process(sqlite_backend, "list", "--json").stdout)
        assert [(r["status"], r["cycles_done"], r["cycles_planned"]) for r in listed] == [
            ("completed", 2, 2)
        ]
