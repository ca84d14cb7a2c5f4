"""End to end, as a researcher works: distinct replicates, model mappings, notes left out.

A batch of 1 model x 3 replicates on the stub's simulated
agent (which varies with the request's seed) yields three different runs, and their
seeds are in RUN_START, `status --json` and the report.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from contreact.analysis.report import build_report
from contreact.checkpoints.engines import engine_for
from contreact.checkpoints.event_mirror import log_path
from contreact.checkpoints.registry import get_run
from contreact.config import ConfigError, parse_config
from contreact.engine.runner import start_run
from contreact.graph.state import Context
from contreact.stub import StubServer
from contreact.studies.batch import load_batch
from support.backends import Backend
from support.cli import cli, cli_in_process
from support.stub import scripted_stub


def events(backend: Backend, run_id: str) -> list[dict[str, Any]]:
    text = log_path(backend.storage(), run_id).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines()]


def write_batch(path: Path, **fields: Any) -> Path:
    path.write_text(yaml.safe_dump(fields), encoding="utf-8")
    return path


def test_three_replicates_are_three_different_runs_with_their_seeds(
    sqlite_backend: Backend, tmp_path: Path
) -> None:
    backend = sqlite_backend
    with StubServer(models=["stub-model"]).start() as server:
        config = write_batch(
            tmp_path / "reps.yaml",
            batch="reps",
            models=["stub-model"],
            replicates=3,
            parallel=2,
            cycles=2,
            ollama={"host": server.url, "timeout_s": 20, "retries": 2},
            storage=backend.storage_yaml(),
        )
        result = cli(backend, "batch", str(config), timeout=300)
        assert result.returncode == 0, result.stderr + result.stdout
        sent_seeds = {r["body"]["options"].get("seed") for r in server.requests()}
    run_ids = [f"reps.stub-model.r{n}" for n in (1, 2, 3)]
    expected_seeds = {run_ids[0]: 42, run_ids[1]: 43, run_ids[2]: 44}  # seed + N - 1
    assert sent_seeds == {42, 43, 44}

    reflections = {}
    for run_id, seed in expected_seeds.items():
        log = events(backend, run_id)
        (start,) = [e for e in log if e["event_type"] == "RUN_START"]
        assert start["payload"]["seed"] == seed == start["payload"]["options"]["seed"]
        status = cli_in_process(backend, "status", run_id, "--json")
        assert json.loads(status.stdout)["seed"] == seed
        reflections[run_id] = tuple(
            e["payload"]["final_reflection"] for e in log if e["event_type"] == "CYCLE_END"
        )
        memory = [e["payload"] for e in log if e["event_type"] == "TOOL_CALL"]
        assert memory, run_id
    # Three different runs: no two replicates wrote the same notes.
    assert len(set(reflections.values())) == 3
    assert all(len(set(r)) == 2 for r in reflections.values())

    engine = engine_for(backend.storage())
    runs = [get_run(engine, r) for r in reversed(run_ids)]  # sorted back by replicate
    files = build_report(backend.storage(), runs, tmp_path / "out", title="reps", lexical=True)
    markdown = files.markdown.read_text(encoding="utf-8")
    methods = markdown.split("## Methods", 1)[1].split("\n## ", 1)[0]
    methods = methods.split("\n### Provenance", 1)[0]  # the methods table, not provenance's
    rows = [line for line in methods.splitlines() if line.startswith("| reps.")]
    assert [row.split(" | ")[0].lstrip("| ") for row in rows] == run_ids
    for row, (run_id, seed) in zip(rows, expected_seeds.items(), strict=True):
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[:6] == [run_id, "stub-model", run_id[-1], str(seed), "0.6", "8192"]


def test_batch_models_as_mappings_and_unseeded_replicates(tmp_path: Path) -> None:
    spec = load_batch(
        write_batch(
            tmp_path / "b.yaml",
            batch="m",
            models=[
                "llama3.1:8b",
                {"name": "gpt-oss:20b", "reasoning": "high", "model_options": {"num_ctx": 32768}},
                {"name": "qwen3:8b", "num_ctx": 16384, "reasoning": False},
            ],
            replicates=2,
            model_options={"seed": None, "temperature": 0.7},
        )
    )
    by_id = {r.run_id: r for r in spec.runs}
    assert list(by_id) == [
        "m.llama3.1-8b.r1", "m.llama3.1-8b.r2", "m.gpt-oss-20b.r1", "m.gpt-oss-20b.r2",
        "m.qwen3-8b.r1", "m.qwen3-8b.r2",
    ]  # fmt: skip
    oss = by_id["m.gpt-oss-20b.r2"].config
    assert oss["ollama"]["reasoning"] == "high" and oss["model_options"]["num_ctx"] == 32768
    assert by_id["m.qwen3-8b.r1"].config["model_options"]["num_ctx"] == 16384
    assert by_id["m.qwen3-8b.r1"].config["ollama"]["reasoning"] is False
    llama = by_id["m.llama3.1-8b.r1"].config
    assert llama["ollama"]["reasoning"] is None and llama["model_options"]["num_ctx"] == 8192
    # seed: null -> every replicate unseeded, and no seed is sent to Ollama at all.
    assert all(r.seed is None and r.config["model_options"]["seed"] is None for r in spec.runs)
    context = Context.of(parse_config(oss, "test"))
    assert "seed" not in context.sent_options and context.ollama.reasoning == "high"
    assert context.sent_options["temperature"] == 0.7

    seeded = load_batch(write_batch(tmp_path / "s.yaml", models=["a"], replicates=3))
    assert [r.seed for r in seeded.runs] == [42, 43, 44]
    assert [r.config["model_options"]["seed"] for r in seeded.runs] == [42, 43, 44]

    for models, words in (
        ([{"model_options": {}}], "`models.0.name` is required"),
        ([{"name": "a", "temprature": 1}], "unknown key `models.0.temprature`"),
        ([{"name": "a", "nmae": "b"}], "(did you mean `models.0.name`?)"),
        ([{"name": "a", "reasoning": "extreme"}], "reasoning"),
    ):
        with pytest.raises(ConfigError, match="b.yaml") as info:
            load_batch(write_batch(tmp_path / "b.yaml", models=models))
        assert words in str(info.value)


def long_note(cycle: int) -> str:
    """A reflection of ~1,000 chars (~250 tokens)."""
    return f"I explored theme {cycle} and wrote it down carefully. " * 20


def test_notes_left_out_are_flagged_and_reported(sqlite_backend: Backend, tmp_path: Path) -> None:
    backend = sqlite_backend
    script = {c: [long_note(c)] for c in (1, 2, 3, 4)}
    with scripted_stub(script, models=["stub-model"]) as server:
        config = parse_config(
            {
                "run_id": "tight",
                "model": "stub-model",
                "cycles": 4,
                # 2048 - 1024 reserve - ~730 fixed (prompt, tools, opening): one note fits.
                "model_options": {"num_ctx": 2048},
                "ollama": {"host": server.url, "timeout_s": 20, "retries": 2},
                "similarity": {"enabled": False},
                "storage": backend.storage_yaml(),
            },
            "test",
        )
        assert start_run(config, backend.storage()).status == "completed"
    log = events(backend, "tight")
    trims = [e["payload"] for e in log if e["event_type"] == "CONTEXT_TRIM"]
    assert trims and all(t["reflections_omitted"] >= 1 for t in trims)
    # The prompt fits once the oldest notes are out, and CONTEXT_TRIM says so.
    assert all(t["fits"] is True and t["tokens_after"] <= t["budget"] for t in trims)
    ends = {e["cycle_number"]: e["payload"] for e in log if e["event_type"] == "CYCLE_END"}
    assert (ends[1]["notes_seen"], ends[1]["notes_left_out"]) == ([], [])
    assert (ends[2]["notes_seen"], ends[2]["notes_left_out"]) == ([1, 1], [])
    assert (ends[3]["notes_seen"], ends[3]["notes_left_out"]) == ([2, 2], [1, 1])
    assert (ends[4]["notes_seen"], ends[4]["notes_left_out"]) == ([3, 3], [1, 2])
    run = get_run(engine_for(backend.storage()), "tight")
    files = build_report(backend.storage(), [run], tmp_path / "r", title="t", lexical=True)
    markdown = files.markdown.read_text(encoding="utf-8")
    assert "cycle 3: notes 1-1 left out; cycle 4: notes 1-2 left out" in markdown
