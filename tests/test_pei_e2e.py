"""End to end: `contreact pei` over 2 runs x 2 evaluator models against the stub.

The stub's simulated agent answers a question naming the Phenomenal Experience Inventory
with "Level N ...", N depending on the evaluator model and the history it was given.
The command must fork each run per evaluator, ask the instrument with no tools, store the
parsed levels once, and leave the rated runs exactly as they were.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import func, select
from typer.testing import CliRunner

from checkpoints.cycles import cycle_records
from checkpoints.db import engine_for
from checkpoints.events import count_events, log_path, read_events
from checkpoints.registry import get_run, list_runs
from conftest import Backend, cli
from contreact.analysis.agreement import icc_a1, kendalls_w
from contreact.analysis.pei import load_instrument, pei_results
from contreact.cli import app
from contreact.config import parse_config
from contreact.runner import start_run
from contreact.stub import StubServer

EVALUATORS = ["stub-model", "stub-eval"]
HISTORIES = {"hist-a": 3, "hist-b": 4}  # run id -> cycles: two different histories


@pytest.fixture
def pei_stub() -> Iterator[StubServer]:
    """The simulated-agent stub serving two chat models."""
    with StubServer(models=EVALUATORS).start() as server:
        yield server


def start(backend: Backend, server: StubServer, run_id: str, cycles: int, **extra: Any) -> str:
    config = parse_config(
        {
            "run_id": run_id,
            "model": "stub-model",
            "cycles": cycles,
            "ollama": {"host": server.url, "timeout_s": 20, "retries": 2},
            "storage": backend.storage_yaml(),
            **extra,
        },
        "test",
    )
    return start_run(config, backend.storage()).status


def in_process(backend: Backend, *args: str) -> tuple[int, str, str]:
    """`contreact ARGS` in this process (same typer app, no interpreter start-up)."""
    result = CliRunner().invoke(app, [*backend.cli_args, *args])
    return result.exit_code, result.stdout, result.stderr


def invoke(backend: Backend, *args: str) -> str:
    """A command that must succeed, in-process; its stdout."""
    code, out, err = in_process(backend, *args)
    assert code == 0, out + err
    return out


def snapshot(backend: Backend, run_id: str) -> dict[str, Any]:
    """Everything a user can see of a run."""
    engine = engine_for(backend.storage())
    return {
        "show": json.loads(invoke(backend, "show", run_id, "--json")),
        "memory": json.loads(invoke(backend, "memory", run_id, "--json")),
        "status": json.loads(invoke(backend, "status", run_id, "--json")),
        "events": read_events(engine, run_id),
        "log": log_path(backend.storage(), run_id).read_text(encoding="utf-8"),
    }


def test_pei_matrix_over_two_runs_and_two_evaluators(
    backend: Backend, pei_stub: StubServer
) -> None:
    for run_id, cycles in HISTORIES.items():
        assert start(backend, pei_stub, run_id, cycles) == "completed"
    before = {run_id: snapshot(backend, run_id) for run_id in HISTORIES}
    pei_stub.reset()

    args = ["pei", *HISTORIES, "--evaluator", EVALUATORS[0], "-e", EVALUATORS[1], "--json"]
    result = cli(backend, *args)
    assert result.returncode == 0, result.stderr + result.stdout
    report = json.loads(result.stdout)
    requests = pei_stub.requests()

    # One fork per (run, evaluator), each a one-cycle PEI question after the last cycle.
    engine = engine_for(backend.storage())
    instrument = load_instrument()
    expected: list[list[float]] = []
    for run_id, cycles in HISTORIES.items():
        row = []
        for evaluator in EVALUATORS:
            fork = get_run(engine, f"{run_id}.pei.{evaluator}")
            assert (fork.parent_run_id, fork.fork_cycle, fork.model) == (run_id, cycles, evaluator)
            assert fork.status == "completed"
            assert fork.config["user_turn"] == instrument
            assert fork.config["similarity"]["enabled"] is False
            assert fork.config["limits"]["max_tool_calls_per_cycle"] == 0
            assert fork.config["limits"]["max_steps_per_cycle"] == 2
            answer = [r for r in cycle_records(engine, fork.run_id) if r.cycle == cycles + 1]
            level = re.match(r"Level (\d+)\.", answer[0].reflection)
            assert level, answer[0].reflection
            row.append(float(level.group(1)))
        expected.append(row)

    # The evaluator got the instrument verbatim as the user turn, no tools, no header.
    assert len(requests) == 4
    for req in requests:
        body = req["body"]
        assert body["model"] in EVALUATORS
        assert not body.get("tools")
        user = [m for m in body["messages"] if m["role"] == "user"]
        assert [m["content"] for m in user] == [instrument]
        assert "2509.21224" not in json.dumps(body)
        assert body["messages"][0]["role"] == "system"

    # The 2 x 2 matrix, the evaluator means and the agreement.
    matrix = report["matrix"]
    assert matrix["rows"] == list(HISTORIES) and matrix["columns"] == EVALUATORS
    assert matrix["cells"] == expected
    means = report["evaluator_means"]
    for j, evaluator in enumerate(EVALUATORS):
        assert means[evaluator] == pytest.approx(sum(row[j] for row in expected) / 2)
    agreement = {a["statistic"]: a for a in report["agreement"]}
    for statistic in (icc_a1(expected), kendalls_w(expected)):
        got = agreement[statistic.statistic]
        assert got["value"] == statistic.value and got["reason"] == statistic.reason
        assert (got["subjects"], got["raters"]) == (2, 2)
    assert {(r["run_id"], r["evaluator"], r["level"]) for r in report["results"]} == {
        (run_id, evaluator, int(expected[i][j]))
        for i, run_id in enumerate(HISTORIES)
        for j, evaluator in enumerate(EVALUATORS)
    }
    assert report["failures"] == []

    # Stored beside the runs, once.
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(pei_results)).scalar_one() == 4

    # The rated runs are untouched: what show, memory and status say, and their logs.
    for run_id in HISTORIES:
        assert snapshot(backend, run_id) == before[run_id], run_id

    # Again: nothing new is forked, asked or stored; the same matrix comes back.
    runs_before = len(list_runs(engine))
    fork_events = count_events(engine, "hist-a.pei.stub-eval")
    again = invoke(backend, "pei", *HISTORIES, "-e", f"{EVALUATORS[0]},{EVALUATORS[1]}")
    assert again.count("stored earlier") == 4
    assert "ICC(A,1)" in again and "Kendall's W" in again
    assert len(pei_stub.requests()) == 4
    assert len(list_runs(engine)) == runs_before
    assert count_events(engine, "hist-a.pei.stub-eval") == fork_events
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(pei_results)).scalar_one() == 4


def test_pei_bad_input_and_a_failing_evaluator(
    sqlite_backend: Backend, pei_stub: StubServer
) -> None:
    backend = sqlite_backend
    assert start(backend, pei_stub, "done", 1) == "completed"
    # The simulated agent writes to the operator in cycle 2; the queue policy pauses there.
    assert start(backend, pei_stub, "waiting", 2, operator={"mode": "queue"}) == "paused"

    # The real command line once: exit 2 and one line for an unfinished run.
    unfinished = cli(backend, "pei", "done", "waiting", "-e", "stub-model")
    assert unfinished.returncode == 2
    assert len(unfinished.stderr.strip().splitlines()) == 1
    assert "run waiting is paused" in unfinished.stderr and "not completed" in unfinished.stderr
    # Checked before anything was forked.
    engine = engine_for(backend.storage())
    assert [r.run_id for r in list_runs(engine)] == ["done", "waiting"]

    for args, words in (
        (["pei", "nope", "-e", "stub-model"], "no run named nope"),
        (["pei", "done"], "--evaluator"),
        (["pei", "-e", "stub-model"], "name at least one run"),
        (["pei", "--batch", "none", "-e", "stub-model"], "no runs belong to batch 'none'"),
    ):
        code, _, err = in_process(backend, *args)
        assert code == 2 and words in err, (args, err)
        assert len(err.strip().splitlines()) == 1, err

    # A missing evaluator model fails its fork (exit 1) but the others are stored.
    code, out, err = in_process(backend, "pei", "done", "-e", "no-such-model", "-e", "stub-model")
    assert code == 1
    assert "no-such-model" in err and "failed" in err
    assert "done × stub-model: PEI" in out
    with engine.connect() as conn:
        stored = conn.execute(select(pei_results.c.evaluator)).scalars().all()
    assert stored == ["stub-model"]
    assert get_run(engine, "done.pei.no-such-model").status == "failed"
