"""The adversarial suite: every hostile answer in `support.fuzz`, through the CLI.

Each case is served once, to one cycle's first model call, by a misbehaving server in
front of the stub. Whatever the case, the CLI prints no traceback and at most one line
on stderr; transient answers are retried and the run goes on; permanent ones stop the
run with one line and `resume` (the server behaving again) completes it, so no run is
wedged; hostile content is stored. Afterwards every event is in the log exactly once.
Cases run in three batches (one run each) to keep the suite fast.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from contreact.stub import StubServer
from support.backends import Backend
from support.cli import cli, cli_in_process
from support.fuzz import CASES, CONTROLS, HUGE, Case, FuzzServer
from support.runs import read_log, write_config

BATCHES = 3


def test_the_suite_has_the_cases_the_issue_lists() -> None:
    names = " ".join(c.name for c in CASES)
    assert len(CASES) >= 40
    for shape in (
        "500 object", "500 list", "html", "empty", "content-type", "cut mid-chunk",
        "non-JSON chunk", "never sends done", "slow drip", "past the deadline", "503", "429",
        "401-digit", "NaN", "lone surrogate", "NUL", "10,000-deep", "4 MB", "3,000 tool calls",
        "escape sequences", "every control character",
    ):  # fmt: skip
        assert shape in names, shape
    for label in ("401-digit", "NaN", "negative", "string"):
        assert f"final chunk: {label} counts and durations" in names, label
    assert {c.expect for c in CASES} == {"transient", "permanent", "content"}


def _first_calls(events: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """The journaled first model call of each cycle."""
    return {
        e["cycle_number"]: e["payload"]
        for e in events
        if e["event_type"] == "LLM_INVOCATION" and e["payload"]["step"] == 0
    }


@pytest.mark.parametrize("batch", range(BATCHES))
def test_no_hostile_answer_crashes_or_wedges_a_run(
    tmp_path: Path, sqlite_backend: Backend, batch: int
) -> None:
    cases: list[Case] = list(CASES[batch::BATCHES])
    inner = StubServer.from_scenario({"agent": "scripted", "script": {}}).start()
    fuzz = FuzzServer(cases, inner).start()
    try:
        config = write_config(
            tmp_path / "c.yaml",
            sqlite_backend,
            cycles=len(cases),
            ollama={"host": fuzz.url, "timeout_s": 3, "retries": 3, "retry_budget_s": 30},
            similarity={"enabled": False},
        )
        stopped_on: list[str] = []
        done = cli(sqlite_backend, "run", str(config))
        while done.returncode != 0:
            assert "Traceback" not in done.stderr, done.stderr
            assert len(done.stderr.strip().splitlines()) == 1, done.stderr
            assert done.returncode == 1, done.stderr
            # A stop is on the case just served; a second stop with nothing new served
            # would be a wedged run.
            assert fuzz.served and fuzz.served[-1] not in stopped_on, (fuzz.served, done.stderr)
            stopped_on.append(fuzz.served[-1])
            done = cli(sqlite_backend, "resume", "run-1")
        assert "Traceback" not in done.stderr and done.stderr.strip() == "", done.stderr
    finally:
        fuzz.stop()
        inner.stop()

    assert fuzz.served == [c.name for c in cases]
    assert stopped_on == [c.name for c in cases if c.expect == "permanent"]
    events = read_log(sqlite_backend, "run-1")
    first = _first_calls(events)
    for cycle, case in enumerate(cases, start=1):
        retried = [r["kind"] for r in first[cycle].get("retries") or []]
        # A refused server number is absent, and named: never a number in the log.
        assert first[cycle].get("dropped_fields", []) == sorted(case.dropped), case.name
        if case.dropped:
            for field in ("tokens_in", "tokens_out"):
                assert first[cycle][field] is None, (case.name, first[cycle][field])
        if case.expect == "transient":
            assert retried, f"{case.name}: not retried"
        elif case.expect == "content":
            assert not retried, f"{case.name}: retried {retried}"

    # Exactly once: the JSONL mirror is the database's log; one answer per step, one end
    # per cycle, every cycle ended.
    exported = [
        json.loads(x) for x in cli_in_process(sqlite_backend, "export", "run-1").stdout.splitlines()
    ]
    assert events == exported
    steps = Counter(
        (e["cycle_number"], e["payload"]["step"])
        for e in events
        if e["event_type"] == "LLM_INVOCATION"
    )
    assert max(steps.values()) == 1
    ends = Counter(e["cycle_number"] for e in events if e["event_type"] == "CYCLE_END")
    assert ends == Counter(range(1, len(cases) + 1))

    status = json.loads(cli_in_process(sqlite_backend, "status", "run-1", "--json").stdout)
    assert status["status"] == "completed" and status["cycles_completed"] == len(cases)
    memory = json.loads(cli_in_process(sqlite_backend, "memory", "run-1", "--json").stdout)
    if "args: 401-digit integer" in fuzz.served:
        assert memory["big"] == HUGE  # kept digit for digit, as text
    if "args: every control character" in fuzz.served:
        assert memory[f"k{CONTROLS}"] == CONTROLS  # kept character for character
    if "content: every control character" in fuzz.served:
        shown = json.loads(cli_in_process(sqlite_backend, "show", "run-1", "--json").stdout)
        assert any(f"<{CONTROLS}>" in c["reflection"] for c in shown)
    for view in ("show", "memory", "status"):
        shown = cli_in_process(sqlite_backend, view, "run-1")
        assert shown.returncode == 0 and "\x1b" not in shown.stdout, view
