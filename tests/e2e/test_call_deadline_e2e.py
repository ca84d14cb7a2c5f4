"""`ollama.timeout_s` is a deadline for the whole model call, through the CLI (issue 31).

A stream that sends one chunk a second never trips a per-read timeout: before the
deadline, a run with `timeout_s: 3` accepted a 25-second answer of 25 dots as cycle 1's
reflection. Now the call is abandoned at 3 s, counted as a transient timeout and
retried; a server that keeps dripping makes the run fail with one line that says so.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from contreact.stub import StubServer
from support.backends import Backend
from support.cli import cli_in_process
from support.runs import read_log, write_config

DRIP = {"kind": "drip", "seconds": 1, "chunks": 25}


def test_a_one_chunk_a_second_stream_is_abandoned_at_3_s_and_retried(
    tmp_path: Path, sqlite_backend: Backend
) -> None:
    with StubServer().start() as server:
        server.add_faults(DRIP)
        config = write_config(
            tmp_path / "c.yaml",
            sqlite_backend,
            cycles=1,
            ollama={"host": server.url, "timeout_s": 3, "retries": 2, "retry_budget_s": 20},
        )
        started = time.monotonic()
        result = cli_in_process(sqlite_backend, "run", str(config))
        elapsed = time.monotonic() - started
        faults = [r["fault"] for r in server.requests() if r["path"] == "/api/chat"]
    assert result.returncode == 0, result.stderr
    assert faults[:2] == ["drip", None]
    # 3 s on the drip, a second or less of backoff, then the answer: far from 25 s.
    assert 3.0 <= elapsed < 10, elapsed
    log = read_log(sqlite_backend, "run-1")
    first = next(e["payload"] for e in log if e["event_type"] == "LLM_INVOCATION")
    assert [r["kind"] for r in first["retries"]] == ["timeout"]
    assert "within 3 s" in first["retries"][0]["error"]
    assert first["duration_s"] < 3
    end = next(e["payload"] for e in log if e["event_type"] == "CYCLE_END")
    assert "..." not in end["final_reflection"]


def test_a_server_that_keeps_dripping_fails_the_run_with_one_line(
    tmp_path: Path, sqlite_backend: Backend
) -> None:
    with StubServer().start() as server:
        server.add_faults({**DRIP, "times": 2})
        config = write_config(
            tmp_path / "c.yaml",
            sqlite_backend,
            cycles=1,
            ollama={"host": server.url, "timeout_s": 1, "retries": 1, "retry_budget_s": 20},
        )
        url = server.url
        started = time.monotonic()
        result = cli_in_process(sqlite_backend, "run", str(config))
        elapsed = time.monotonic() - started
        # Resumed against a server that answers at its normal pace, the run completes.
        resumed = cli_in_process(sqlite_backend, "resume", "run-1")
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "did not finish answering within 1 s" in lines[0] and url in lines[0]
    assert "timeout_s" in lines[0]
    assert 2.0 <= elapsed < 5, elapsed  # two attempts of 1 s and one backoff
    errors = [e["payload"] for e in read_log(sqlite_backend, "run-1") if e["event_type"] == "ERROR"]
    assert [(e["kind"], e["attempts"]) for e in errors] == [("timeout", 2)]
    assert resumed.returncode == 0, resumed.stderr
    status = json.loads(cli_in_process(sqlite_backend, "status", "run-1", "--json").stdout)
    assert status["status"] == "completed"
