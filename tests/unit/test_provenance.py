"""What a provenance record says when the host cannot answer, and what a report says without one.

A host that is down or does not serve the model gives `unavailable` with the reason (the run
goes on); a real Ollama (no `contreact_stub` in `/api/version`) is recorded as `ollama`; the
host is recorded without credentials; a run made before provenance was recorded is reported
as such, never looked up.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from contreact.analysis.report.methods import NOT_RECORDED, collect_methods
from contreact.analysis.report.tables import methods_lines, provenance_table
from contreact.checkpoints import keys
from contreact.checkpoints.engines import engine_for
from contreact.checkpoints.event_schema import Event, RunStart
from contreact.checkpoints.journal import Ledger
from contreact.checkpoints.registry import create_run, get_run
from contreact.checkpoints.storage import resolve_storage
from contreact.graph.state import Context
from contreact.nodes.provenance import UNAVAILABLE, ask_server, gather, public_host
from contreact.stub import StubServer
from contreact.stub import server as stub_server


@pytest.fixture
def stub() -> Iterator[StubServer]:
    with StubServer() as server:
        yield server


def closed_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def test_a_host_that_is_down_is_recorded_unavailable_with_the_reason_at_once() -> None:
    started = time.monotonic()
    found = ask_server(closed_port(), "llama3.1:8b", timeout_s=5)
    assert time.monotonic() - started < 2
    assert found["server"] == found["digest"] == found["ollama_version"] == UNAVAILABLE
    assert "/api/version" in found["unavailable"] and "ConnectError" in found["unavailable"]


def test_a_model_the_host_does_not_serve_has_no_digest_and_says_why(stub: StubServer) -> None:
    found = ask_server(stub.url, "absent:1b", timeout_s=5)
    assert found["server"] == "stub" and found["ollama_version"] == "0.12.6"
    assert found["digest"] == UNAVAILABLE and found["details"] == {}
    assert found["unavailable"] == "/api/show answered HTTP 404; /api/tags does not list absent:1b"


def test_a_server_without_the_stubs_mark_is_recorded_as_ollama(
    stub: StubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stub_server, "version_body", lambda: {"version": "0.13.0"})
    found = ask_server(stub.url, "stub-model", timeout_s=5)
    assert found["server"] == "ollama" and found["ollama_version"] == "0.13.0"
    assert "stub_version" not in found and "unavailable" not in found
    assert found["details"]["parameter_size"] == "8B"


def test_the_host_is_recorded_without_credentials() -> None:
    assert public_host("https://ann:s3cret@gpu.example:11434/ollama?token=x#f") == (
        "https://gpu.example:11434/ollama"
    )
    assert public_host("http://127.0.0.1:11434") == "http://127.0.0.1:11434"


def test_an_in_process_chat_model_is_recorded_without_asking_any_host() -> None:
    ctx = Context.model_validate({"chat_model": object(), "ollama": {"host": closed_port()}})
    record = gather(ctx, task=None)
    assert record["server"] == "in-process" and record["digest"] == UNAVAILABLE
    assert record["options"] == ctx.sent_options and record["seed"] == 42


def test_a_run_made_before_provenance_was_recorded_is_reported_as_not_recorded(
    tmp_path: Path,
) -> None:
    storage = resolve_storage(tmp_path)
    engine = engine_for(storage)
    config: dict[str, Any] = {"model_options": {"seed": 1}, "limits": {"max_nudges": 2}}
    create_run(engine, "old", model="m", host="http://127.0.0.1:9", config=config)
    Ledger(storage, "old", engine).emit(Event(1, keys.RUN_START, RunStart(model="m")))
    methods = collect_methods(engine, [get_run(engine, "old")])
    (run,) = methods.runs
    assert run.digest == NOT_RECORDED and run.records == [] and run.server == NOT_RECORDED
    assert run.started  # the RUN_START's own time
    assert f"Provenance of old: {NOT_RECORDED}." in methods_lines(methods)
    assert provenance_table(methods)[1][0][1] == NOT_RECORDED
    assert methods.ollama_versions == {"http://127.0.0.1:9": NOT_RECORDED}


def test_a_run_whose_host_was_down_at_its_start_is_reported_with_the_reason(
    tmp_path: Path,
) -> None:
    storage = resolve_storage(tmp_path)
    engine = engine_for(storage)
    host = closed_port()
    ctx = Context.model_validate({"model": "m", "ollama": {"host": host}})
    for run_id, steps in (("down", 5), ("other", 9)):
        config = {"limits": {"max_steps_per_cycle": steps}, "user_turn": "Go."}
        create_run(engine, run_id, model="m", host=host, config=config)
        start = RunStart(model="m", provenance=gather(ctx, task=None))
        Ledger(storage, run_id, engine).emit(Event(1, keys.RUN_START, start))
    methods = collect_methods(engine, [get_run(engine, r) for r in ("down", "other")])
    run = methods.runs[0]
    assert run.digest == "unavailable" and run.server == "unavailable"
    headers, body = provenance_table(methods)
    row = dict(zip(headers, body[0], strict=True))
    assert row["Server version"] == "unavailable"
    assert row["Model details"].startswith(f"{host}/api/version: ConnectError")
    lines = methods_lines(methods)
    # What differs between runs is given per run; what they share, once.
    assert "Limits: max_steps_per_cycle=5 (down); max_steps_per_cycle=9 (other)." in lines
    assert "User turn: 'Go.'." in lines
    assert not any("bundled stub" in line for line in lines)
