"""End to end: `contreact pei` over a 2-model x 2-replicate batch x 2 evaluators on the stub.

The stub's simulated agent answers a question naming the Phenomenal Experience Inventory
with "Level N ...", N depending on the evaluator model and the history it was given.
The command must give each evaluator the rated run's whole history (every tool call,
tool result and operator exchange), ask the instrument with no tools, store the parsed
levels once, build the run and model matrices, and leave the rated runs as they were.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from sqlalchemy import func, select
from typer.testing import CliRunner

from contreact.analysis.agreement import icc_a1, kendalls_w
from contreact.analysis.pei.instrument import load_instrument
from contreact.analysis.pei.results import stored_results
from contreact.analysis.report import build_report
from contreact.checkpoints.engines import engine_for
from contreact.checkpoints.event_mirror import log_path
from contreact.checkpoints.event_store import read_events
from contreact.checkpoints.registry import get_run, list_runs
from contreact.checkpoints.schema import pei as pei_results
from contreact.cli import app
from contreact.config import parse_config
from contreact.engine.runner import start_run
from contreact.stub import StubServer
from contreact.studies.batch import load_batch
from support.backends import Backend
from support.cli import cli_in_process

EVALUATORS = ["stub-model", "stub-eval"]
MODELS = ["stub-model", "stub-other"]  # the batch's models (one is also an evaluator)
OPERATOR_REPLY = "Operator here: keep exploring, and tell me about topic-2 later."


@pytest.fixture
def pei_stub() -> Iterator[StubServer]:
    """The simulated-agent stub serving the chat models."""
    with StubServer(models=sorted({*EVALUATORS, *MODELS})).start() as server:
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


def run_batch(backend: Backend, server: StubServer, tmp_path: Path) -> list[str]:
    """The runs of a 2-model x 2-replicate batch, planned by `load_batch`, run in-process."""
    path = tmp_path / "b.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "batch": "b",
                "models": MODELS,
                "replicates": 2,
                "cycles": 3,
                "ollama": {"host": server.url, "timeout_s": 20, "retries": 2},
                "operator": {"mode": "auto", "reply": OPERATOR_REPLY},
                "storage": backend.storage_yaml(),
            }
        ),
        encoding="utf-8",
    )
    spec = load_batch(path)
    for planned in spec.runs:
        config = parse_config(planned.config, planned.run_id)
        assert start_run(config, backend.storage()).status == "completed"
    return [r.run_id for r in spec.runs]


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


def jsonl(backend: Backend, run_id: str) -> list[dict[str, Any]]:
    text = log_path(backend.storage(), run_id).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines()]


def test_pei_gives_the_whole_history_and_the_model_matrix(
    backend: Backend, pei_stub: StubServer, tmp_path: Path
) -> None:
    rated = run_batch(backend, pei_stub, tmp_path)
    assert rated == ["b.stub-model.r1", "b.stub-model.r2", "b.stub-other.r1", "b.stub-other.r2"]
    before = {run_id: snapshot(backend, run_id) for run_id in rated}
    pei_stub.reset()

    args = ["pei", "--batch", "b", "--evaluator", EVALUATORS[0], "-e", EVALUATORS[1], "--json"]
    code, stdout, stderr = in_process(backend, *args)
    assert code == 0, stdout + stderr
    report = json.loads(stdout)
    requests = pei_stub.requests()
    instrument = load_instrument()

    # Each request holds the rated run's whole history, in order: every tool
    # call (name and arguments), every tool result, every operator exchange, every
    # reflection; then the instrument verbatim as the last user turn, with no tools.
    assert len(requests) == len(rated) * len(EVALUATORS)
    by_run: dict[str, list[dict[str, Any]]] = {}
    for req, (run_id, evaluator) in zip(
        requests, [(r, e) for r in rated for e in EVALUATORS], strict=True
    ):
        body = req["body"]
        assert body["model"] == evaluator and not body.get("tools")
        # The evaluator's own defaults (pei.*), not the run's temperature 0.6.
        assert {k: body["options"].get(k) for k in ("temperature", "seed", "num_ctx")} == {
            "temperature": 0.0,
            "seed": 42,
            "num_ctx": 32768,
        }
        messages = body["messages"]
        assert messages[0]["role"] == "system" and messages[-1] == {
            "role": "user",
            "content": instrument,
        }
        assert "2509.21224" not in json.dumps(body)
        by_run.setdefault(run_id, []).append(body)
        log = jsonl(backend, run_id)
        calls = [e["payload"] for e in log if e["event_type"] == "TOOL_CALL"]
        sent_calls = [
            (c["function"]["name"], c["function"]["arguments"])
            for m in messages
            for c in m.get("tool_calls") or []
        ]
        assert sent_calls == [(c["tool_name"], c["parameters"]) for c in calls]
        assert [m["content"] for m in messages if m["role"] == "tool"] == [
            c["output"] for c in calls
        ]
        exchanges = [e["payload"] for e in log if e["event_type"] == "OPERATOR_MESSAGE"]
        assert exchanges, "the simulated agent writes to the operator in cycle 2"
        for exchange in exchanges:
            assert exchange["reply"] == OPERATOR_REPLY
            assert any(
                c["function"]["arguments"].get("message") == exchange["message"]
                for m in messages
                for c in m.get("tool_calls") or []
            )
            assert any(m["role"] == "tool" and OPERATOR_REPLY in m["content"] for m in messages)
        reflections = [
            e["payload"]["final_reflection"] for e in log if e["event_type"] == "CYCLE_END"
        ]
        answers = [m.get("content") for m in messages if m["role"] == "assistant"]
        assert [a for a in answers if a in reflections] == reflections
    # Both evaluators saw the same history of a run.
    for bodies in by_run.values():
        assert bodies[0]["messages"] == bodies[1]["messages"]

    # The answers, read by hand ("Level N." opens each simulated answer).
    engine = engine_for(backend.storage())
    level = {
        (r["run_id"], r["evaluator"]): int(re.match(r"Level (\d+)\.", r["answer"]).group(1))  # type: ignore[union-attr]
        for r in report["results"]
    }
    assert len(level) == 8
    expected = [[float(level[(run_id, e)]) for e in EVALUATORS] for run_id in rated]
    matrix = report["matrix"]
    assert matrix["rows"] == rated and matrix["columns"] == EVALUATORS
    assert matrix["cells"] == expected
    # The model x model matrix = the mean over replicates, by hand.
    by_model = report["model_matrix"]
    assert by_model["rows"] == MODELS and by_model["columns"] == EVALUATORS
    hand = [[(expected[2 * i][j] + expected[2 * i + 1][j]) / 2 for j in range(2)] for i in range(2)]
    assert by_model["cells"] == hand
    means = report["evaluator_means"]
    for j, evaluator in enumerate(EVALUATORS):
        assert means[evaluator] == pytest.approx(sum(row[j] for row in expected) / 4)
    agreement = {a["statistic"]: a for a in report["agreement"]}
    for statistic in (icc_a1(expected), kendalls_w(expected)):
        got = agreement[statistic.statistic]
        assert got["value"] == statistic.value and got["reason"] == statistic.reason
        assert (got["subjects"], got["raters"]) == (4, 2)
    assert report["failures"] == []
    assert all(json.loads(r["omitted"])["cycles"] == [] for r in report["results"])

    # Stored beside the runs, once; the rated runs are untouched.
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(pei_results)).scalar_one() == 8
    for run_id in rated:
        assert snapshot(backend, run_id) == before[run_id], run_id

    # Again: nothing new is asked or stored; the same matrix comes back.
    runs_before = len(list_runs(engine))
    again = invoke(backend, "pei", "--batch", "b", "-e", f"{EVALUATORS[0]},{EVALUATORS[1]}")
    assert again.count("stored earlier") == 8
    assert "ICC(A,1)" in again and "Kendall's W" in again
    assert len(pei_stub.requests()) == 8
    assert len(list_runs(engine)) == runs_before
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(pei_results)).scalar_one() == 8


def test_a_small_pei_context_leaves_out_the_oldest_and_says_so(
    sqlite_backend: Backend, pei_stub: StubServer, tmp_path: Path
) -> None:
    backend = sqlite_backend
    assert start(backend, pei_stub, "long", 4) == "completed"
    pei_stub.reset()
    # With a small pei.num_ctx, what was left out is stored ...
    invoke(backend, "pei", "long", "-e", "stub-eval", "--num-ctx", "2400")
    (sent,) = pei_stub.requests()
    engine = engine_for(backend.storage())
    (stored,) = stored_results(engine, ["long"])
    omitted = json.loads(stored.omitted or "{}")
    assert omitted["steps_of_cycles"] or omitted["cycles"]
    assert omitted["tokens"] <= omitted["budget"] == 2400 - 1024
    left_out = set(omitted["steps_of_cycles"]) | set(omitted["cycles"])
    assert 1 in left_out and 4 not in omitted["cycles"]  # oldest first; the last stays
    log = jsonl(backend, "long")
    kept_calls = [c for m in sent["body"]["messages"] for c in m.get("tool_calls") or []]
    all_calls = [e for e in log if e["event_type"] == "TOOL_CALL"]
    assert 0 < len(kept_calls) < len(all_calls) or not kept_calls
    last = [e for e in log if e["event_type"] == "CYCLE_END"][-1]["payload"]["final_reflection"]
    assert any(m.get("content") == last for m in sent["body"]["messages"])
    # ... and reported.
    files = build_report(backend.storage(), [get_run(engine, "long")], tmp_path / "r", title="t")
    text = files.markdown.read_text(encoding="utf-8")
    assert stored.omitted_text() in text and "left out" in stored.omitted_text()

    # A level set by hand is stored as manual and kept by the next `pei`.
    invoke(backend, "pei", "--set", "long", "stub-eval", "7")
    (manual,) = stored_results(engine, ["long"])
    assert (manual.level, manual.manual, manual.answer) == (7, True, stored.answer)
    out = invoke(backend, "pei", "long", "-e", "stub-eval")
    assert "PEI 7 (stored earlier) (manual)" in out
    code, _, err = in_process(backend, "pei", "--set", "long", "stub-eval", "11")
    assert code == 2 and "1-10" in err


def test_pei_bad_input_and_a_failing_evaluator(
    sqlite_backend: Backend, pei_stub: StubServer
) -> None:
    backend = sqlite_backend
    assert start(backend, pei_stub, "done", 1) == "completed"
    # The simulated agent writes to the operator in cycle 2; the queue policy pauses there.
    assert start(backend, pei_stub, "waiting", 2, operator={"mode": "queue"}) == "paused"

    # The real command line once: exit 2 and one line for an unfinished run.
    unfinished = cli_in_process(backend, "pei", "done", "waiting", "-e", "stub-model")
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

    # A missing evaluator model fails (exit 1, one line why) but the others are stored.
    code, out, err = in_process(backend, "pei", "done", "-e", "no-such-model", "-e", "stub-model")
    assert code == 1
    assert "no-such-model" in err and "failed" in err
    assert "done × stub-model: PEI" in out
    with engine.connect() as conn:
        stored = conn.execute(select(pei_results.c.evaluator)).scalars().all()
    assert stored == ["stub-model"]


# ------------------------------------------------ a reviewer's PEI (issue 28, must-show 3)

THREE = ["stub-eval", "stub-other", "stub-model"]  # asked in another order than the config's


def batch_config(
    backend: Backend, server: StubServer, tmp_path: Path, cycles: int, **extra: Any
) -> Path:
    """The config of a 2-model x 2-replicate batch `s` of `cycles` cycles."""
    path = tmp_path / "s.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "batch": "s",
                "models": MODELS,
                "replicates": 2,
                "cycles": cycles,
                "ollama": {"host": server.url, "timeout_s": 20, "retries": 0},
                "storage": backend.storage_yaml(),
                **extra,
            }
        ),
        encoding="utf-8",
    )
    return path


def small_batch(backend: Backend, server: StubServer, tmp_path: Path, **extra: Any) -> list[str]:
    """A 2-model x 2-replicate x 2-cycle batch `s`, run in-process; its run ids."""
    spec = load_batch(batch_config(backend, server, tmp_path, 2, **extra))
    for planned in spec.runs:
        start_run(parse_config(planned.config, planned.run_id), backend.storage())
    return [r.run_id for r in spec.runs]


def pei_json(backend: Backend, *args: str) -> dict[str, Any]:
    code, out, err = in_process(backend, "pei", "--batch", "s", *args, "--json")
    assert code == 0, out + err
    return json.loads(out)  # type: ignore[no-any-return]


def report_of(backend: Backend, tmp_path: Path, name: str) -> tuple[str, Path]:
    out_dir = tmp_path / name
    invoke(backend, "report", "--batch", "s", "--out", str(out_dir))
    return (out_dir / "report.md").read_text(encoding="utf-8"), out_dir


def csv_rows(path: Path) -> list[dict[str, str]]:
    import csv

    with path.open(encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


def test_pei_a_reviewer_accepts(
    sqlite_backend: Backend, pei_stub: StubServer, tmp_path: Path
) -> None:
    backend = sqlite_backend
    # The runs sample at 0.6 with seed 42 (the defaults); the evaluator has its own options.
    rated = small_batch(backend, pei_stub, tmp_path, pei={"temperature": 0.2, "seed": 7})
    pei_stub.reset()
    report = pei_json(backend, *(f"-e{e}" for e in THREE))
    own = {"temperature": 0.2, "seed": 7, "num_ctx": 32768}
    for request in pei_stub.requests():
        assert {k: request["body"]["options"].get(k) for k in own} == own
    assert all(json.loads(r["options"]) == own for r in report["results"])
    assert not any(r["stale"] for r in report["results"])

    # One order for both matrices: the config's models, then the other evaluator; so the
    # model x model diagonal holds each model's ratings of its own histories.
    level = {(r["run_id"], r["evaluator"]): float(r["level"]) for r in report["results"]}
    order = ["stub-model", "stub-other", "stub-eval"]
    assert report["matrix"]["columns"] == order and report["model_matrix"]["columns"] == order
    assert report["model_matrix"]["rows"] == MODELS
    for i, model in enumerate(MODELS):
        own_runs = [r for r in rated if f".{model}." in r]
        self_mean = sum(level[(r, model)] for r in own_runs) / len(own_runs)
        assert report["model_matrix"]["cells"][i][i] == pytest.approx(self_mean)

    # Self vs cross per model, by hand: self-rating minus the others' mean, per history.
    figures = {f["model"]: f for f in report["self_vs_cross"]}
    for model in MODELS:
        own_runs = [r for r in rated if f".{model}." in r]
        d = [
            level[(r, model)] - sum(level[(r, e)] for e in THREE if e != model) / 2
            for r in own_runs
        ]
        assert figures[model]["difference"] == pytest.approx(sum(d) / 2)
        # Two histories, 4 sign assignments: when both differences share a sign only
        # flipping both reaches the observed |mean| (p = 2/4); otherwise all do (p = 1).
        assert figures[model]["p_value"] == (0.5 if d[0] * d[1] > 0 else 1.0)
        assert figures[model]["min_p"] == 0.5

    text, out_dir = report_of(backend, tmp_path, "r1")
    assert "### PEI self vs cross" in text
    assert "](pei_self_vs_cross.png)" in text and (out_dir / "pei_self_vs_cross.png").stat().st_size
    sentence = next(line for line in text.splitlines() if "rated its own histories" in line)
    assert "stub-model" in sentence or "stub-other" in sentence
    rows = {r["model"]: r for r in csv_rows(out_dir / "pei_self_vs_cross.csv")}
    for model in MODELS:
        assert float(rows[model]["self_minus_cross"]) == pytest.approx(figures[model]["difference"])
    answers = csv_rows(out_dir / "pei_results.csv")
    assert {a["stale"] for a in answers} == {"False"}
    assert all(json.loads(a["options"]) == own for a in answers)
    assert all(a["at_cycle"] == a["run_last_cycle"] == "2" for a in answers)
    sha = answers[0]["instrument_sha"]
    assert f"PEI instrument SHA-256 {sha}: 12 rating(s)" in text
    assert "2 of 2" in text and "temperature=0.2, seed=7, num_ctx=32768" in text
    assert "stale" not in text

    # The run goes on after it was rated: its ratings are stale everywhere they appear,
    # and kept out of the means.
    extended = rated[0]
    invoke(backend, "resume", extended, "--cycles", "1", "-q")
    pei_stub.reset()
    out = invoke(backend, "pei", "--batch", "s", *(f"-e{e}" for e in THREE))
    assert pei_stub.requests() == []
    assert out.count("(stale: rated at cycle 2 of 3; --refresh re-rates it)") == 3
    assert out.count("stale*") == 3
    model_rows = out.split("the diagonal: self-ratings):")[1].strip().splitlines()
    assert model_rows[0].split("\t") == ["history model \\ evaluator", *order]
    assert model_rows[1].split("\t")[:2] == ["stub-model", f"{level[(rated[1], 'stub-model')]:g}"]
    stale = pei_json(backend, *(f"-e{e}" for e in THREE))
    assert [r["run_id"] for r in stale["results"] if r["stale"]] == [extended] * 3
    assert stale["matrix"]["cells"][0] == [None, None, None]
    assert stale["model_matrix"]["cells"][0][0] == level[(rated[1], "stub-model")]
    text, out_dir = report_of(backend, tmp_path, "r2")
    assert text.count("stale*") == 3 + 3  # the run matrix's cells, the answers' cycles
    assert f"stub-eval's rating of {extended} is stale: made at cycle 2 of 3" in text
    assert "2 of 3 (stale*)" in text
    page = (out_dir / "report.html").read_text(encoding="utf-8")
    assert page.count("stale*") == text.count("stale*") and "PEI self vs cross" in page
    assert f"stub-eval&#x27;s rating of {extended} is stale: made at cycle 2 of 3" in page
    by_run = csv_rows(out_dir / "pei_matrix.csv")
    assert by_run[0]["stub-model"] == "" and "rated at cycle 2 of 3" in by_run[0]["stale"]
    assert [a["stale"] for a in csv_rows(out_dir / "pei_results.csv")] == ["True"] * 3 + [
        "False"
    ] * 9

    # A level set by hand on a stale rating stays stale (it read the shorter history).
    invoke(backend, "pei", "--set", extended, "stub-eval", "4")
    out = invoke(backend, "pei", extended, "-e", "stub-eval")
    assert "PEI 4 (stored earlier) (manual) (stale: rated at cycle 2 of 3;" in out

    # --refresh asks again for the stale ratings only (the hand-set one too), at the run's
    # last cycle.
    pei_stub.reset()
    refreshed = pei_json(backend, "--refresh", *(f"-e{e}" for e in THREE))
    asked = pei_stub.requests()
    assert len(asked) == 3
    assert all(req["body"]["model"] in THREE for req in asked)
    assert not any(r["stale"] for r in refreshed["results"])
    assert {r["at_cycle"] for r in refreshed["results"] if r["run_id"] == extended} == {3}
    assert not any(r["manual"] for r in refreshed["results"])
    kept = {(r["run_id"], r["evaluator"]): r["created_at"] for r in report["results"]}
    for r in refreshed["results"]:
        if r["run_id"] != extended:
            assert r["created_at"] == kept[(r["run_id"], r["evaluator"])]
    text, _ = report_of(backend, tmp_path, "r3")
    assert "stale" not in text
    # Histories of 3 and 2 cycles are now pooled in the means, and the report says so.
    assert "pool histories of different lengths: 2 cycles (" in text
    assert f"3 cycles ({extended})" in text


def test_pei_batch_rates_what_it_can_and_names_the_rest(
    sqlite_backend: Backend, pei_stub: StubServer, tmp_path: Path
) -> None:
    backend = sqlite_backend
    # One run of the batch fails: its model is not served by the stub.
    rated = small_batch(backend, pei_stub, tmp_path, models=["stub-model", "missing-model"])
    engine = engine_for(backend.storage())
    statuses = {r: get_run(engine, r).status for r in rated}
    failed = [r for r, status in statuses.items() if status != "completed"]
    assert failed and len(failed) < len(rated), statuses
    code, out, err = in_process(backend, "pei", "--batch", "s", "-e", "stub-eval")
    assert code == 1
    for run_id in failed:
        assert f"skipped: run {run_id} is {statuses[run_id]}" in err
    assert f"{len(failed)} run(s) could not be rated" in err
    for run_id in rated:
        assert (f"{run_id} × stub-eval: PEI" in out) == (run_id not in failed)
    assert {r.run_id for r in stored_results(engine)} == set(rated) - set(failed)
    # Named runs are still checked strictly: exit 2, nothing asked.
    code, _, err = in_process(backend, "pei", failed[0], "-e", "stub-eval")
    assert code == 2 and "not completed" in err


def test_pei_rows_follow_the_config_not_the_order_the_runs_finished(
    pei_stub: StubServer, sqlite_backend: Backend, tmp_path: Path
) -> None:
    path = batch_config(sqlite_backend, pei_stub, tmp_path, 1)
    spec = load_batch(path)
    config_order = [r.run_id for r in spec.runs]
    # Each model's second replicate finished first (as with `--parallel` or several workers).
    for planned in sorted(spec.runs, key=lambda r: (MODELS.index(r.model), -r.replicate)):
        start_run(parse_config(planned.config, planned.run_id), sqlite_backend.storage())
    registered = [r.run_id for r in list_runs(engine_for(sqlite_backend.storage()))]
    assert registered != config_order and sorted(registered) == sorted(config_order)

    assert pei_json(sqlite_backend, "--evaluator", "stub-eval")["matrix"]["rows"] == config_order
    table = invoke(sqlite_backend, "pei", "--batch", "s", "--evaluator", "stub-eval")
    rows = [line.split("\t")[0] for line in table.splitlines()]  # the run matrix's rows
    printed = [row for row in rows if row in config_order]
    assert printed == config_order, table
