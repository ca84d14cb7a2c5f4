"""Table 1: the arithmetic (unit) and a stub batch counted by hand (end to end)."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update

from contreact.analysis.metrics import (
    TABLE1_KEYS,
    RunSummary,
    format_mean_sd,
    length_notes,
    mean_sd,
    model_summaries,
    run_summary,
    summarize_cycles,
)
from contreact.analysis.report import build_report
from contreact.analysis.runs import AnalysisInputError, select_runs
from contreact.checkpoints.cycles import CycleRecord
from contreact.checkpoints.engines import engine_for
from contreact.checkpoints.event_mirror import log_path
from contreact.checkpoints.event_store import read_events
from contreact.checkpoints.schema import runs
from contreact.config import parse_config
from contreact.engine.runner import start_run
from support.backends import Backend
from support.stub import scripted_stub

# ----------------------------------------------------------------------------- units


def cycle(n: int, **metrics: Any) -> CycleRecord:
    return CycleRecord(cycle=n, reflection="", metrics=metrics)


def test_run_totals_sum_cycles_and_take_the_last_key_count() -> None:
    records = [
        cycle(1, memory_ops_total=3, messages_to_operator=1, final_memory_keys=4,
              reflection_chars=10, response_chars=25, memory_write_chars=7),
        cycle(2, memory_ops_total=2, messages_to_operator=0, final_memory_keys=2,
              reflection_chars=5, response_chars=5, memory_write_chars=0),
        # A cycle recorded before a metric existed counts it as 0, not as an error.
        cycle(3, memory_ops_total=1, final_memory_keys=3, reflection_chars=1),
    ]  # fmt: skip
    assert summarize_cycles(records) == {
        "memory_tool_ops": 6,
        "messages_to_operator": 1,
        "final_memory_keys": 3,
        "reflection_chars": 16,
        "response_chars": 30,
        "memory_write_chars": 7,
    }
    assert summarize_cycles([]) == dict.fromkeys(TABLE1_KEYS, 0)


def test_mean_and_sample_sd() -> None:
    assert mean_sd([2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]) == pytest.approx(
        (5.0, math.sqrt(32 / 7))
    )
    assert mean_sd([3.0]) == (3.0, None)
    with pytest.raises(ValueError):
        mean_sd([])
    assert format_mean_sd(5.0, math.sqrt(32 / 7)) == "5.0 ± 2.1"
    assert format_mean_sd(3.0, None) == "3.0"


def summary(run_id: str, model: str, ops: int, keys: int) -> RunSummary:
    values = dict.fromkeys(TABLE1_KEYS, 0)
    values.update(memory_tool_ops=ops, final_memory_keys=keys)
    return RunSummary(run_id, model, "b", "completed", 10, values)


def test_model_table_groups_runs_in_order_of_first_appearance() -> None:
    rows = [summary("m1-a", "m1", 30, 20), summary("m2-a", "m2", 10, 5),
            summary("m1-b", "m1", 40, 26), summary("m1-c", "m1", 38, 26)]  # fmt: skip
    m1, m2 = model_summaries(rows)
    assert (m1.model, m1.runs, m2.model, m2.runs) == (
        "m1",
        ["m1-a", "m1-b", "m1-c"],
        "m2",
        ["m2-a"],
    )
    assert m1.mean["memory_tool_ops"] == pytest.approx(36.0)
    assert m1.sd["memory_tool_ops"] == pytest.approx(math.sqrt((36 + 16 + 4) / 2))
    assert m1.mean["final_memory_keys"] == pytest.approx(24.0)
    assert m1.sd["final_memory_keys"] == pytest.approx(math.sqrt((16 + 4 + 4) / 2))
    assert m2.mean["memory_tool_ops"] == 10 and m2.sd["memory_tool_ops"] is None


def test_runs_of_other_lengths_and_batches_are_never_pooled() -> None:
    def run(run_id: str, batch: str, cycles: int, ops: int) -> RunSummary:
        return RunSummary(
            run_id,
            "m",
            batch,
            "completed",
            cycles,
            {**dict.fromkeys(TABLE1_KEYS, 0), "memory_tool_ops": ops},
        )

    one_batch = model_summaries(
        [run("a1", "A", 7, 70), run("a2", "A", 5, 50), run("a3", "A", 5, 40)]
    )
    assert [(m.label, m.runs, m.mean["memory_tool_ops"]) for m in one_batch] == [
        ("m · 5 cycles", ["a2", "a3"], 45.0),
        ("m · 7 cycles", ["a1"], 70.0),
    ]
    assert length_notes(one_batch) == [
        "Runs of m differ in length (5, 7 cycles): Table 1 shows each length apart, never pooled."
    ]
    two = model_summaries([run("a1", "A", 5, 50), run("b1", "B", 5, 10), run("a2", "A", 5, 40)])
    assert [(m.label, m.batch, m.runs) for m in two] == [
        ("A · m", "A", ["a1", "a2"]),
        ("B · m", "B", ["b1"]),
    ]
    assert length_notes(two) == []


# ---------------------------------------------------------------- a batch, by hand


def call(name: str, content: str = "", **arguments: str) -> dict[str, Any]:
    return {"content": content, "tool_calls": [{"name": name, "arguments": arguments}]}


ALPHA = {
    1: [
        call("write", key="k1", value="hello"),
        call("write", key="k2", value="world!!"),
        call("read", "checking", key="k1"),
        {"content": "A1 done."},
    ],
    2: [
        call("read", key="missing"),
        call("send_message_to_operator", message="hi"),
        call("delete", key="k1"),
        call("list"),
        {"content": "Second cycle of alpha."},
    ],
}
BETA = {
    1: [call("write", key="a", value="1234567890"), call("pattern_search", pattern="a"), "B one"],
    2: [
        call("write", key="a", value="xy"),
        call("write", key="b", value="z"),
        call("write", key="c", value="x" * 30),  # over the 20-char limit: refused by the tool
        call("send_message_to_operator", message="one"),
        call("send_message_to_operator", message="two"),
        "B two!",
    ],
}
GAMMA = {
    1: [call("delete", key="nope"), call("write", key="g", value="abc"), "G1"],
    2: ["G2 quiet."],
}

# Counted by hand from the scripts above (and checked against the event logs below).
# Memory ops count every memory call that ran, failed ones included (read of a missing
# key, delete of a missing key, an over-long write); written chars count successful
# writes only; response chars count all text the model generated: content (also beside a
# tool call), thinking, and each tool call's arguments as JSON, e.g. alpha's first step
# `{"key": "k1", "value": "hello"}` is 31 chars; alpha = 31+33+21+8 + 18+17+13+2+22 = 165.
EXPECTED_RUNS = {
    "alpha": {"memory_tool_ops": 6, "messages_to_operator": 1, "final_memory_keys": 1,
              "reflection_chars": 30, "response_chars": 165, "memory_write_chars": 12},
    "beta": {"memory_tool_ops": 5, "messages_to_operator": 2, "final_memory_keys": 2,
             "reflection_chars": 11, "response_chars": 206, "memory_write_chars": 13},
    "gamma": {"memory_tool_ops": 2, "messages_to_operator": 0, "final_memory_keys": 1,
              "reflection_chars": 11, "response_chars": 54, "memory_write_chars": 3},
}  # fmt: skip
R2 = math.sqrt(0.5)
EXPECTED_MODELS = {
    "stub-model": (
        {"memory_tool_ops": 5.5, "messages_to_operator": 1.5, "final_memory_keys": 1.5,
         "reflection_chars": 20.5, "response_chars": 185.5, "memory_write_chars": 12.5},
        {"memory_tool_ops": R2, "messages_to_operator": R2, "final_memory_keys": R2,
         "reflection_chars": 9.5 * 2 * R2, "response_chars": 41 * R2,
         "memory_write_chars": R2},
    ),
    "stub-b": (EXPECTED_RUNS["gamma"], dict.fromkeys(TABLE1_KEYS)),
}  # fmt: skip


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def counted_from_log(lines: list[dict[str, Any]]) -> dict[str, int]:
    """Table 1 of a run, counted independently from its raw event log (as docs/research.md says)."""
    calls = [e["payload"] for e in lines if e["event_type"] == "TOOL_CALL"]
    memory: dict[str, str] = {}
    for c in calls:
        if c["error"]:
            continue
        if c["tool_name"] == "write":
            memory[c["parameters"]["key"]] = c["parameters"]["value"]
        elif c["tool_name"] == "delete":
            memory.pop(c["parameters"]["key"], None)
    memory_tools = {"write", "read", "list", "delete", "pattern_search"}
    return {
        "memory_tool_ops": sum(c["tool_name"] in memory_tools and not c["refused"] for c in calls),
        "messages_to_operator": sum(e["event_type"] == "OPERATOR_MESSAGE" for e in lines),
        "final_memory_keys": len(memory),
        "reflection_chars": sum(
            len(e["payload"]["final_reflection"]) for e in lines if e["event_type"] == "CYCLE_END"
        ),
        "response_chars": sum(
            len(r["content"])
            + len(r["thinking"])
            + sum(len(json.dumps(c["args"], ensure_ascii=False)) for c in r["tool_calls"])
            for r in (
                e["payload"]["response"] for e in lines if e["event_type"] == "LLM_INVOCATION"
            )
        ),
        "memory_write_chars": sum(
            len(c["parameters"]["value"])
            for c in calls
            if c["tool_name"] == "write" and not c["error"]
        ),
    }


def start(backend: Backend, run_id: str, model: str, script: dict[int, list[Any]]) -> None:
    with scripted_stub(script, models=[model]) as server:
        config = parse_config(
            {
                "run_id": run_id,
                "model": model,
                "cycles": 2,
                "ollama": {"host": server.url, "timeout_s": 20, "retries": 2},
                "limits": {"memory_value_chars": 20},
                "storage": backend.storage_yaml(),
            },
            "test",
        )
        assert start_run(config, backend.storage()).status == "completed"


def test_table1_of_a_stub_batch_matches_the_hand_count(tmp_path: Path, backend: Backend) -> None:
    start(backend, "alpha", "stub-model", ALPHA)
    start(backend, "beta", "stub-model", BETA)
    start(backend, "gamma", "stub-b", GAMMA)
    start(backend, "outsider", "stub-model", ALPHA)  # same model, not in the batch
    storage = backend.storage()
    engine = engine_for(storage)
    with engine.begin() as conn:
        conn.execute(
            update(runs).where(runs.c.run_id.in_(["alpha", "beta", "gamma"])).values(batch="b1")
        )

    chosen = select_runs(engine, batch="b1")
    assert [r.run_id for r in chosen] == ["alpha", "beta", "gamma"]
    rows = [run_summary(engine, r) for r in chosen]
    for row in rows:
        assert row.values == EXPECTED_RUNS[row.run_id], row.run_id
        assert counted_from_log(read_events(engine, row.run_id)) == EXPECTED_RUNS[row.run_id]
        # The JSONL file alone gives the same recount.
        jsonl = read_jsonl(log_path(storage, row.run_id))
        assert counted_from_log(jsonl) == EXPECTED_RUNS[row.run_id]
        assert row.cycles == 2 and row.status == "completed" and row.batch == "b1"

    models = {m.model: m for m in model_summaries(rows)}
    assert list(models) == ["stub-model", "stub-b"]
    assert models["stub-model"].runs == ["alpha", "beta"]
    for model, (mean, sd) in EXPECTED_MODELS.items():
        for key in TABLE1_KEYS:
            assert models[model].mean[key] == pytest.approx(mean[key]), (model, key)
            expected_sd = sd[key]
            if expected_sd is None:
                assert models[model].sd[key] is None
            else:
                assert models[model].sd[key] == pytest.approx(expected_sd), (model, key)

    with pytest.raises(AnalysisInputError, match="no runs belong to batch 'nope'"):
        select_runs(engine, batch="nope")
    if backend.name != "sqlite":
        return  # the report reads through the same functions on every backend

    # The same numbers in the report's CSV files.
    files = build_report(storage, chosen, tmp_path / "report", title="b1", lexical=True)
    with (files.out_dir / "table1_runs.csv").open(encoding="utf-8") as fh:
        csv_runs = {row["run_id"]: row for row in csv.DictReader(fh)}
    assert set(csv_runs) == set(EXPECTED_RUNS)
    for run_id, expected in EXPECTED_RUNS.items():
        assert {k: int(csv_runs[run_id][k]) for k in TABLE1_KEYS} == expected
        # Every Table 1 metric recomputed from the JSONL log alone = the report.
        recount = counted_from_log(read_jsonl(log_path(storage, run_id)))
        assert recount == {k: int(csv_runs[run_id][k]) for k in TABLE1_KEYS}
    with (files.out_dir / "table1_models.csv").open(encoding="utf-8") as fh:
        csv_models = {row["model"]: row for row in csv.DictReader(fh)}
    assert csv_models["stub-model"]["runs"] == "2"
    assert float(csv_models["stub-model"]["response_chars_mean"]) == pytest.approx(185.5)
    assert float(csv_models["stub-model"]["response_chars_sd"]) == pytest.approx(41 * R2, abs=1e-4)
    assert csv_models["stub-b"]["response_chars_sd"] == ""
