"""A run traced over OTLP: OpenInference spans at a local receiver, equal to its event log.

`contreact run` with OTEL_EXPORTER_OTLP_ENDPOINT pointing at a receiver on 127.0.0.1 sends
one AGENT span for the run, a CHAIN span per cycle, an LLM span per model call (model and
token counts as the LLM_INVOCATION recorded them) and a TOOL span per tool call (as the
TOOL_CALL recorded it). A collector that is down (a closed port) neither slows nor fails
the run: one warning names it. Replayed steps (a paused run answered, a run killed and
resumed) are not traced again. Unset, nothing is imported.

Needs the `otel` extra (the `integrations` tier of `.ci/run` installs it).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from contreact.checkpoints.engines import engine_for
from contreact.checkpoints.event_store import read_events
from contreact.stub import StubServer
from support.backends import Backend
from support.cli import cli, cli_in_process
from support.extras import needs
from support.paths import ROOT
from support.runs import read_log, write_config
from support.stub import scripted_stub

needs("openinference.instrumentation.langchain", "otel")

from support.otlp import (  # noqa: E402
    ReceivedSpan,
    closed_port,
    otlp_grpc_receiver,
    otlp_http_receiver,
)

pytestmark = pytest.mark.integrations

SCRIPT: dict[int, list[Any]] = {
    1: [
        {"tool_calls": [{"name": "write", "arguments": {"key": "k", "value": "v"}}]},
        {
            "tool_calls": [
                {"name": "read", "arguments": {"key": "k"}},
                {"name": "send_message_to_operator", "arguments": {"message": "Hello?"}},
            ]
        },
        {"content": "First note."},
    ],
    2: [{"tool_calls": [{"name": "list", "arguments": {}}]}, {"content": "Second note."}],
    3: [{"content": "Third note."}],
}
MODEL_CALLS, TOOL_CALLS = 6, 4


def otel_env(url: str, protocol: str = "http/protobuf") -> dict[str, str]:
    return {"OTEL_EXPORTER_OTLP_ENDPOINT": url, "OTEL_EXPORTER_OTLP_PROTOCOL": protocol}


def events_of(backend: Backend, run_id: str, kind: str) -> list[dict[str, Any]]:
    """The run's events of `kind`, from the database (a killed run's log file may lag)."""
    logged = read_events(engine_for(backend.storage()), run_id)
    return [e["payload"] for e in logged if e["event_type"] == kind]


def by_kind(spans: list[ReceivedSpan], kind: str) -> list[ReceivedSpan]:
    return sorted((s for s in spans if s.kind == kind), key=lambda s: s.start_ns)


def check_trace(backend: Backend, run_id: str, spans: list[ReceivedSpan]) -> None:
    """The spans of one uninterrupted drive are the run's model and tool calls, nested."""
    calls = events_of(backend, run_id, "LLM_INVOCATION")
    tools = events_of(backend, run_id, "TOOL_CALL")
    cycles = events_of(backend, run_id, "CYCLE_END")
    kinds = Counter(s.kind for s in spans)
    assert kinds == {"AGENT": 1, "CHAIN": len(cycles), "LLM": len(calls), "TOOL": len(tools)}
    (run,) = by_kind(spans, "AGENT")
    assert {s.trace_id for s in spans} == {run.trace_id}
    assert run.attributes["session.id"] == run_id and run.name == f"run {run_id}"
    assert run.attributes["contreact.status"] == "completed"
    assert run.resource["service.name"] == "contreact"
    chains = by_kind(spans, "CHAIN")
    assert [c.attributes["contreact.cycle"] for c in chains] == [1, 2, 3]
    assert all(c.parent_id == run.span_id for c in chains)
    assert [c.attributes["output.value"] for c in chains] == [c["final_reflection"] for c in cycles]
    cycle_of = {c.span_id: c.attributes["contreact.cycle"] for c in chains}
    # Model calls: model, token counts, a duration, in their cycle, as the log has them.
    llm = by_kind(spans, "LLM")
    assert [(s.attributes["llm.model_name"], s.attributes["session.id"]) for s in llm] == [
        (c["options"]["model"], run_id) for c in calls
    ]
    assert [
        (s.attributes["llm.token_count.prompt"], s.attributes["llm.token_count.completion"])
        for s in llm
    ] == [(c["tokens_in"], c["tokens_out"]) for c in calls]
    assert all(s.end_ns > s.start_ns for s in llm)
    logged = read_log(backend, run_id)
    llm_cycles = [e["cycle_number"] for e in logged if e["event_type"] == "LLM_INVOCATION"]
    assert [cycle_of[s.parent_id] for s in llm] == llm_cycles
    # Tool calls: name, parameters, output, in their cycle.
    tool_spans = by_kind(spans, "TOOL")
    assert [
        (
            s.name,
            s.attributes["contreact.call_id"],
            json.loads(s.attributes["tool.parameters"]),
            s.attributes["output.value"],
        )
        for s in tool_spans
    ] == [(t["tool_name"], t["call_id"], t["parameters"], t["output"]) for t in tools]
    tool_cycles = [e["cycle_number"] for e in logged if e["event_type"] == "TOOL_CALL"]
    assert [cycle_of[s.parent_id] for s in tool_spans] == tool_cycles


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_a_run_traced_to_a_local_receiver(
    sqlite_backend: Backend, tmp_path: Path, protocol: str
) -> None:
    backend = sqlite_backend
    receive = otlp_http_receiver if protocol == "http/protobuf" else otlp_grpc_receiver
    with scripted_stub(SCRIPT) as server, receive() as receiver:
        config = write_config(
            tmp_path / "r.yaml", backend, run_id="traced", ollama={"host": server.url}
        )
        done = cli(backend, "run", str(config), env=otel_env(receiver.url, protocol))
        assert done.returncode == 0, done.stderr
        assert done.stderr == ""
        receiver.wait_for(lambda spans: sum(s.kind == "AGENT" for s in spans) == 1)
        assert len(server.requests()) == MODEL_CALLS
    spans = receiver.got()
    check_trace(backend, "traced", spans)
    assert Counter(s.kind for s in spans) == {"AGENT": 1, "CHAIN": 3, "LLM": 6, "TOOL": 4}
    assert len(events_of(backend, "traced", "TOOL_CALL")) == TOOL_CALLS


def test_a_batchs_runs_are_traced_from_their_own_processes(
    sqlite_backend: Backend, tmp_path: Path
) -> None:
    """`contreact batch` drives each run in a process of its own, which ends without atexit."""
    backend = sqlite_backend
    with (
        StubServer(models=["stub-a", "stub-b"]).start() as server,
        otlp_http_receiver() as receiver,
    ):
        spec = {
            "batch": "bt",
            "models": ["stub-a", "stub-b"],
            "replicates": 1,
            "cycles": 2,
            "ollama": {"host": server.url},
            "storage": backend.storage_yaml(),
        }
        path = tmp_path / "bt.batch.yaml"
        path.write_text(json.dumps(spec), encoding="utf-8")
        done = cli(backend, "batch", str(path), env=otel_env(receiver.url))
        assert done.returncode == 0, done.stderr
        receiver.wait_for(lambda spans: sum(s.kind == "AGENT" for s in spans) == 2)
    spans = receiver.got()
    for run_id in ("bt.stub-a.r1", "bt.stub-b.r1"):
        mine = [s for s in spans if s.attributes.get("session.id") == run_id]
        kinds = Counter(s.kind for s in mine)
        calls, tools = (events_of(backend, run_id, k) for k in ("LLM_INVOCATION", "TOOL_CALL"))
        assert kinds == {"AGENT": 1, "CHAIN": 2, "LLM": len(calls), "TOOL": len(tools)}, run_id


def test_a_collector_that_is_down_neither_slows_nor_fails_a_run(
    sqlite_backend: Backend, tmp_path: Path
) -> None:
    backend = sqlite_backend
    port = closed_port()
    with scripted_stub(SCRIPT) as server:
        config = write_config(
            tmp_path / "r.yaml", backend, run_id="lone", ollama={"host": server.url}
        )
        # An exporter that waited for its own timeout would hold the process far past the
        # helper's: the run's process must end on its own, done, whatever that timeout.
        env = {**otel_env(f"http://127.0.0.1:{port}"), "OTEL_EXPORTER_OTLP_TIMEOUT": "600"}
        done = cli(backend, "run", str(config), env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert len(events_of(backend, "lone", "CYCLE_END")) == 3
    (line,) = done.stderr.splitlines()
    assert re.fullmatch(
        f"contreact: traces of run lone cannot reach http://127.0.0.1:{port}/v1/traces "
        r"\(.+\); its spans are dropped, the run goes on",
        line,
    ), line
    # With the default timeout, the exporter gives up within the run: still one warning.
    with scripted_stub(SCRIPT) as server:
        config = write_config(
            tmp_path / "s.yaml", backend, run_id="lone2", ollama={"host": server.url}
        )
        done = cli(backend, "run", str(config), env=otel_env(f"http://127.0.0.1:{port}"))
    assert done.returncode == 0, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"contreact: traces of run lone2 cannot reach http://127.0.0.1:{port}/")


def test_a_paused_run_answered_is_not_traced_twice(sqlite_backend: Backend, tmp_path: Path) -> None:
    """The operator's reply resumes the dispatch step from its top: its first call replays."""
    backend = sqlite_backend
    with scripted_stub(SCRIPT) as server, otlp_http_receiver() as receiver:
        config = write_config(
            tmp_path / "r.yaml",
            backend,
            run_id="asks",
            ollama={"host": server.url},
            operator={"mode": "queue"},
        )
        env = otel_env(receiver.url)
        assert cli(backend, "run", str(config), env=env).returncode == 3
        receiver.wait_for(lambda spans: sum(s.kind == "AGENT" for s in spans) == 1)
        done = cli(backend, "reply", "asks", "Hi, agent.", env=env)
        assert done.returncode == 0, done.stderr
        receiver.wait_for(lambda spans: sum(s.kind == "AGENT" for s in spans) == 2)
    spans = receiver.got()
    calls, tools = (events_of(backend, "asks", k) for k in ("LLM_INVOCATION", "TOOL_CALL"))
    kinds = Counter(s.kind for s in spans)
    assert (kinds["LLM"], kinds["TOOL"]) == (len(calls), len(tools)) == (MODEL_CALLS, TOOL_CALLS)
    tool_ids = [s.attributes["contreact.call_id"] for s in spans if s.kind == "TOOL"]
    assert sorted(tool_ids) == sorted(t["call_id"] for t in tools)
    # Cycle 1 is traced in two drives: paused before its `read` result, answered after it.
    first, second = sorted((s for s in spans if s.kind == "AGENT"), key=lambda s: s.start_ns)
    assert second.attributes["contreact.resumed"] is True
    in_second = [s for s in spans if s.trace_id == second.trace_id]
    assert [s.attributes["contreact.call_id"] for s in by_kind(in_second, "TOOL")] == [
        "c1-s1-t1", "c2-s0-t0"
    ]  # fmt: skip


def test_a_killed_run_resumed_traces_only_the_calls_it_makes(
    sqlite_backend: Backend, tmp_path: Path
) -> None:
    """Killed with cycle 1's second answer journaled: the resume replays it, asking nothing."""
    backend = sqlite_backend
    with StubServer.from_scenario({"agent": "scripted", "script": SCRIPT}).start() as server:
        with otlp_http_receiver() as receiver:
            config = write_config(
                tmp_path / "r.yaml", backend, run_id="cut", ollama={"host": server.url}
            )
            env = otel_env(receiver.url)
            killed = cli(
                backend,
                "run",
                str(config),
                env={**env, "CONTREACT_FAILPOINTS": "after-commit:c1:s1:llm"},
            )
            assert killed.returncode == -9, killed.stderr
            before = len(events_of(backend, "cut", "LLM_INVOCATION"))
            assert before == 2
            server.reset()
            done = cli(backend, "resume", "cut", env=env)
            assert done.returncode == 0, done.stderr
            receiver.wait_for(
                lambda spans: any(s.attributes.get("contreact.resumed") for s in spans)
            )
            asked = len(server.requests())
    spans = receiver.got()
    (resumed,) = [s for s in spans if s.kind == "AGENT" and s.attributes["contreact.resumed"]]
    mine = [s for s in spans if s.trace_id == resumed.trace_id]
    calls = events_of(backend, "cut", "LLM_INVOCATION")
    assert len(by_kind(mine, "LLM")) == asked == len(calls) - before == MODEL_CALLS - 2
    # The replayed answer made no span, its tool calls did (they ran after the kill).
    assert [s.attributes["contreact.call_id"] for s in by_kind(mine, "TOOL")] == [
        "c1-s1-t0", "c1-s1-t1", "c2-s0-t0"
    ]  # fmt: skip
    assert [c.attributes["contreact.cycle"] for c in by_kind(mine, "CHAIN")] == [1, 2, 3]


def test_unset_nothing_is_imported_or_sent(tmp_path: Path) -> None:
    """Off (unset, or switched off the OpenTelemetry way): no tracing module is imported.

    The OpenTelemetry API and SDK themselves may be imported anyway: langsmith, which
    LangChain imports, loads `opentelemetry.sdk` whenever it is installed. contreact's
    spans, OpenInference and the OTLP exporters are not, so nothing can be sent.
    """
    with otlp_http_receiver() as receiver:
        script = f"""
import os, sys
sys.path.insert(0, {str(ROOT / "tests")!r})
from pathlib import Path
from contreact.config import parse_config
from contreact.engine.runner import start_run
from support.backends import Backend
from support.stub import scripted_stub
backend = Backend("sqlite", Path({str(tmp_path / "runs")!r}))
off = {{"OTEL_EXPORTER_OTLP_ENDPOINT": {receiver.url!r}, "OTEL_SDK_DISABLED": "true"}}
for run_id, env in (("plain", {{}}), ("off", off)):
    os.environ.update(env)
    with scripted_stub({{1: ["Note."]}}) as server:
        config = parse_config({{"run_id": run_id, "model": "stub-model", "cycles": 1,
            "ollama": {{"host": server.url}}, "storage": backend.storage_yaml()}}, "test")
        assert start_run(config, backend.storage()).status == "completed"
print(*sorted(sys.modules))
"""
        env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
        done = subprocess.run(
            [sys.executable, "-c", script],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert receiver.requests == 0
    loaded = done.stdout.split()
    assert "contreact.engine.tracing" in loaded
    tracing = ("openinference", "opentelemetry.exporter", "contreact.engine.spans")
    assert [m for m in loaded if m.startswith(tracing)] == []


def test_asked_for_without_the_extra_or_with_another_protocol(
    sqlite_backend: Backend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = sqlite_backend
    with scripted_stub(SCRIPT) as server:
        config = write_config(
            tmp_path / "r.yaml", backend, run_id="bad", ollama={"host": server.url}
        )
        env = otel_env("http://127.0.0.1:9", "http/json")
        done = cli_in_process(backend, "run", str(config), env=env)
        assert (done.returncode, done.stderr.strip()) == (
            2,
            "contreact: OTEL_EXPORTER_OTLP_PROTOCOL=http/json: contreact sends traces over "
            "http/protobuf or grpc",
        )
        monkeypatch.setitem(sys.modules, "contreact.engine.spans", None)  # as if not installed
        done = cli_in_process(backend, "resume", "bad", env=otel_env("http://127.0.0.1:9"))
        assert (done.returncode, done.stderr.strip()) == (
            2,
            "contreact: OTEL_EXPORTER_OTLP_ENDPOINT is set: traces need the `otel` extra "
            "(pip install 'contreact[otel]'), or unset OTEL_EXPORTER_OTLP_ENDPOINT",
        )
        assert server.requests() == []
