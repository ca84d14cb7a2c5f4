"""The `real` tier: the CLI end to end against each shipped real model (docs/real-models.md).

Gemma 3 270M and SmolLM2-135M run in llama.cpp behind the stub's Ollama API
(`contreact.stub.real`), served as Ollama would serve them: no `tools` capability, so the
run decides on text tools itself. Needs the `real` extra; without it these tests skip,
except in CI with CONTREACT_REAL=1 (`.ci/run`), where a missing extra is a failure.
Figures (seconds, steps, calls) are printed by `benchmarks/reports/real_models.py`, not here.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from contreact.analysis.report.tables import Hashes
from contreact.cli.runs import real_demo_settings
from contreact.stub import ChatRequest, Reply, StubServer
from contreact.stub.real import (
    REAL_EXTRA_HINT,
    SHIPPED_MODELS,
    build_real_server,
    extra_installed,
    gguf_digest,
)
from contreact.text.toolcalls import FinalAnswer, ToolCalls, parse_response
from contreact.tools.registry import MEMORY_TOOLS, PARAMETER_SCHEMAS
from support.backends import Backend
from support.cli import cli, cli_start, kill_when
from support.runs import outcome, read_log, write_config

pytestmark = [pytest.mark.real, pytest.mark.slow]

REQUIRED = os.environ.get("CI") == "true" and os.environ.get("CONTREACT_REAL") == "1"


def require_real() -> None:
    """Skip without the extra, with the reason; in CI's real tier, fail instead."""
    if extra_installed():
        return
    if REQUIRED:
        pytest.fail(f"CONTREACT_REAL=1 in CI but {REAL_EXTRA_HINT}")
    pytest.skip(REAL_EXTRA_HINT)


class Started:
    """The real model's answerer, counting calls as they begin (the kill point)."""

    def __init__(self, agent: Any) -> None:
        self.agent = agent
        self.count = 0

    def respond(self, req: ChatRequest) -> Reply:
        self.count += 1
        return self.agent.respond(req)  # type: ignore[no-any-return]


@pytest.fixture(scope="module", params=SHIPPED_MODELS)
def real(request: pytest.FixtureRequest) -> Iterator[StubServer]:
    """One real model behind the stub, for every test of this module in turn."""
    require_real()
    with build_real_server(request.param).start() as server:
        server.agent = Started(server.agent)
        yield server


def real_config(path: Path, backend: Backend, server: StubServer, **fields: Any) -> Path:
    settings = real_demo_settings(server.models()[0])
    ollama = {**settings.pop("ollama"), "host": server.url}
    return write_config(path, backend, **{**settings, "ollama": ollama, **fields})


def bodies(requests: list[dict[str, Any]]) -> Counter[str]:
    return Counter(json.dumps(r["body"], sort_keys=True) for r in requests)


def test_the_cli_runs_each_shipped_model_in_text_tool_mode(
    tmp_path: Path, sqlite_backend: Backend, real: StubServer
) -> None:
    model = real.models()[0]
    config = real_config(tmp_path / "c.yaml", sqlite_backend, real, cycles=2)
    done = cli(sqlite_backend, "run", str(config), timeout=900)
    assert done.returncode == 0, done.stderr + done.stdout
    log = read_log(sqlite_backend, "run-1")
    (start,) = [e["payload"] for e in log if e["event_type"] == "RUN_START"]
    assert start["tools"] == {"mode": "text", "configured": "auto", "capabilities": ["completion"]}
    # Served without Ollama, the model's digest is the GGUF file's SHA-256 (must-show 2).
    served = real.agent.agent.model.file.path  # type: ignore[attr-defined]
    assert start["provenance"]["digest"] == gguf_digest(served)
    assert start["provenance"]["server"] == "stub"
    calls = [e["payload"] for e in log if e["event_type"] == "LLM_INVOCATION"]
    assert [e["event_type"] for e in log].count("CYCLE_END") == 2
    num_predict = real_demo_settings(model)["model_options"]["num_predict"]
    for call in calls:
        # Ollama's done_reason and counts, measured by llama.cpp.
        assert call["done_reason"] in ("stop", "length")
        assert call["tokens_in"] > 400  # the system prompt with the tool descriptions
        assert 0 <= call["tokens_out"] <= num_predict
        assert (call["done_reason"] == "length") == ("truncated" in call["flags"])
        assert call["options"]["tool_mode"] == "text" and not call["options"]["tools_offered"]
    # No request ever carried native tools (the server would have refused them).
    assert all(not r["body"].get("tools") for r in real.requests())
    report = cli(sqlite_backend, "report", "run-1", "--out", str(tmp_path / "report"))
    assert report.returncode == 0, report.stderr
    markdown = (tmp_path / "report" / "report.md").read_text(encoding="utf-8")
    assert f"- {model} (1 run): {len(calls)} steps, " in markdown
    # Tables show a hash shortened (they must fit a page); the HTML keeps it whole beside.
    assert Hashes.short(gguf_digest(served)) in markdown
    page = (tmp_path / "report" / "report.html").read_text(encoding="utf-8")
    assert f'title="{gguf_digest(served)}"' in page


def test_in_constrained_mode_every_step_parses_and_reaches_the_memory_tools(
    tmp_path: Path, sqlite_backend: Backend, real: StubServer
) -> None:
    # Text mode gives no parseable call from these models; held to one call or the final
    # answer by the format's grammar, every answer is one of the two.
    real.reset()
    config = real_config(
        tmp_path / "c.yaml", sqlite_backend, real, cycles=3, tools={"mode": "constrained"}
    )
    done = cli(sqlite_backend, "run", str(config), timeout=900)
    assert done.returncode == 0, done.stderr + done.stdout
    log = read_log(sqlite_backend, "run-1")
    calls = [e["payload"] for e in log if e["event_type"] == "LLM_INVOCATION"]
    assert calls and all(c["options"]["tool_mode"] == "constrained" for c in calls)
    assert all(r["body"].get("format") for r in real.requests())
    outcomes = [
        parse_response(c["response"]["content"], c["response"]["tool_calls"], PARAMETER_SCHEMAS)
        for c in calls
    ]
    assert all(isinstance(o, ToolCalls | FinalAnswer) for o in outcomes), outcomes
    assert not [e for e in log if e["event_type"] == "ERROR"]
    tried = [e["payload"] for e in log if e["event_type"] == "TOOL_CALL"]
    ran = [t["tool_name"] for t in tried if not t["error"]]
    assert set(ran) & MEMORY_TOOLS, tried


def test_kill_9_during_a_real_model_call_then_resume_equals_an_uninterrupted_run(
    tmp_path: Path, sqlite_backend: Backend, real: StubServer
) -> None:
    # Seeded at temperature 0.6, the real backend gives the same answer to the same
    # request whatever it answered before (benchmarks/reports/real_models.py measures it), so
    # the resumed run must end exactly as the uninterrupted one.
    reference = real_config(tmp_path / "ref.yaml", sqlite_backend, real, run_id="ref", cycles=2)
    real.reset()
    done = cli(sqlite_backend, "run", str(reference), timeout=900)
    assert done.returncode == 0, done.stderr
    expected, expected_requests = outcome(sqlite_backend, "ref"), bodies(real.requests())

    real.reset()
    started: Started = real.agent  # type: ignore[assignment]
    crashed = real_config(tmp_path / "crash.yaml", sqlite_backend, real, run_id="crash", cycles=2)
    before = started.count
    proc = cli_start(sqlite_backend, "run", str(crashed))
    # Killed while the model generates its second answer (the first is checkpointed).
    kill_when(proc, lambda: started.count >= before + 2, timeout=600)
    assert proc.returncode == -9
    time.sleep(0.5)
    resumed = cli(sqlite_backend, "resume", "crash", timeout=900)
    assert resumed.returncode == 0, resumed.stderr + resumed.stdout
    sent = bodies(real.requests())
    # Every request of the uninterrupted run, and only the one killed in flight twice.
    assert sum(sent.values()) == sum(expected_requests.values()) + 1
    extra = sent - expected_requests
    assert len(extra) == 1 and list(extra.values()) == [1]
    assert outcome(sqlite_backend, "crash") == expected


def test_over_num_ctx_the_oldest_messages_go_first_as_in_ollama(real: StubServer) -> None:
    model = real.agent.agent.model  # type: ignore[attr-defined]
    llm = model.load(4096)
    system = {"role": "system", "content": "SYSTEM-TEXT: you live in cycles."}
    messages = [
        system,
        {"role": "user", "content": "Cycle 1 begins."},
        {"role": "assistant", "content": "alpha " * 600},
        {"role": "user", "content": "<tool_response>\nok\n</tool_response>"},
        {"role": "assistant", "content": "A short note."},
        {"role": "user", "content": "Go on."},
    ]
    whole = model.prompt_tokens(llm, messages, 4096)
    without_first_turn = model.prompt_tokens(llm, [system, *messages[2:]], 4096)
    # One token short of the whole prompt: Ollama drops the oldest message (the opening
    # user turn) and keeps the system message; the history now starts at an assistant turn.
    cut = model.prompt_tokens(llm, messages, len(whole) - 1)
    assert cut == without_first_turn
    text = llm.detokenize(cut, special=True).decode()
    # ChatML keeps the system turn; Gemma's template folds it into index 1, an assistant
    # turn here, so the model never sees it.
    assert ("SYSTEM-TEXT" in text) == (model.family == "chatml")
    assert "alpha" in text and "Cycle 1 begins." not in text
