"""End to end: transient faults retried, permanent ones stop the run cleanly, bad configs exit 2."""

from __future__ import annotations

import json
from pathlib import Path

from contreact.stub import StubServer
from support.backends import Backend
from support.cli import cli_in_process
from support.runs import read_log, write_config


def test_http_500_twice_then_normal_completes(tmp_path: Path, backend: Backend) -> None:
    with StubServer().start() as server:
        server.add_faults(
            {"kind": "http", "status": 500, "error": "boom"},
            {"kind": "http", "status": 500, "error": "boom"},
        )
        config = write_config(
            tmp_path / "c.yaml", backend, run_id="flaky", cycles=2, ollama={"host": server.url}
        )
        result = cli_in_process(backend, "run", str(config))
        statuses = [r["status"] for r in server.requests()]
    assert result.returncode == 0, result.stderr
    assert statuses[:3] == [500, 500, 200]
    log = read_log(backend, "flaky")
    first_call = next(e for e in log if e["event_type"] == "LLM_INVOCATION")
    assert [r["kind"] for r in first_call["payload"]["retries"]] == ["server", "server"]
    assert not any(e["event_type"] == "ERROR" for e in log)


def test_missing_model_fails_cleanly_then_resumes(tmp_path: Path, backend: Backend) -> None:
    with StubServer(models=["other-model"]).start() as server:
        config = write_config(
            tmp_path / "c.yaml",
            backend,
            run_id="nomodel",
            model="llama3.1:8b",
            cycles=2,
            ollama={"host": server.url},
        )
        result = cli_in_process(backend, "run", str(config))
        assert result.returncode == 1
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, result.stderr
        assert "llama3.1:8b" in lines[0] and server.url in lines[0] and "not found" in lines[0]
        assert "Traceback" not in result.stderr + result.stdout
        assert len(server.requests()) == 1, "a missing model must not be retried"
        status = json.loads(cli_in_process(backend, "status", "nomodel", "--json").stdout)
        assert status["status"] == "failed" and "llama3.1:8b" in status["reason"]
        errors = [e for e in read_log(backend, "nomodel") if e["event_type"] == "ERROR"]
        assert [e["payload"]["kind"] for e in errors] == ["model_missing"]

        server.add_model("llama3.1:8b")
        resumed = cli_in_process(backend, "resume", "nomodel")
    assert resumed.returncode == 0, resumed.stderr
    status = json.loads(cli_in_process(backend, "status", "nomodel", "--json").stdout)
    assert status["status"] == "completed" and status["cycles_completed"] == 2


def test_ollama_down_fails_with_one_line(tmp_path: Path, sqlite_backend: Backend) -> None:
    server = StubServer().start()
    url = server.url
    server.stop()
    config = write_config(
        tmp_path / "c.yaml",
        sqlite_backend,
        run_id="down",
        cycles=1,
        ollama={"host": url, "retries": 1, "retry_budget_s": 3},
    )
    result = cli_in_process(sqlite_backend, "run", str(config))
    assert result.returncode == 1
    assert (
        result.stderr.count("\n") == 1
        and "cannot reach Ollama" in result.stderr
        and url in result.stderr
    )


def test_bad_config_names_both_fields(tmp_path: Path, sqlite_backend: Backend) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text("run_id: x\nmodel: m\ncycles: ten\nlimits: {max_step_per_cycle: 3}\n")
    result = cli_in_process(sqlite_backend, "run", str(config))
    assert result.returncode == 2
    line = result.stderr.strip()
    assert len(line.splitlines()) == 1 and str(config) in line
    assert "`cycles`" in line and "limits.max_step_per_cycle" in line
    assert "did you mean `limits.max_steps_per_cycle`" in line
    assert not (sqlite_backend.data_dir / "logs").exists(), "a rejected config must not start a run"


def test_unknown_run_and_missing_config_exit_2(tmp_path: Path, sqlite_backend: Backend) -> None:
    assert cli_in_process(sqlite_backend, "status", "ghost").returncode == 2
    missing = cli_in_process(sqlite_backend, "run", str(tmp_path / "nope.yaml"))
    assert missing.returncode == 2 and "cannot read config" in missing.stderr


def test_hanging_model_times_out_and_fails_with_one_line(
    tmp_path: Path, sqlite_backend: Backend
) -> None:
    with StubServer().start() as server:
        server.add_faults(*[{"kind": "delay", "seconds": 3}] * 2, {"kind": "http", "status": 429})
        config = write_config(
            tmp_path / "c.yaml",
            sqlite_backend,
            run_id="hang",
            cycles=1,
            ollama={"host": server.url, "timeout_s": 1, "retries": 1, "retry_budget_s": 10},
        )
        result = cli_in_process(sqlite_backend, "run", str(config))
        assert result.returncode == 1
        assert (
            result.stderr.count("\n") == 1
            and "did not finish answering within 1 s" in result.stderr
        )
        errors = [
            e["payload"] for e in read_log(sqlite_backend, "hang") if e["event_type"] == "ERROR"
        ]
        assert [(e["kind"], e["attempts"]) for e in errors] == [("timeout", 2)]
        # Resumed, the remaining fault (429, rate limited) is retried and the run completes.
        resumed = cli_in_process(sqlite_backend, "resume", "hang")
    assert resumed.returncode == 0, resumed.stderr
    first = next(e for e in read_log(sqlite_backend, "hang") if e["event_type"] == "LLM_INVOCATION")
    assert [r["kind"] for r in first["payload"]["retries"]] == ["rate_limited"]
