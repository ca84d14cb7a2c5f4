"""`contreact.load` and `contreact export --batch`: a batch's data as DataFrames and as files.

On a 2 models × 2 replicates stub batch: the per-cycle table equals a recount from the
exported event log, every parquet file reads back equal to what `load` returns, and the
base install (no pandas) still exports CSV and says in one line what to install for more.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from pandas.testing import assert_frame_equal

import contreact
from contreact.analysis.frames import TABLES, RunTables
from contreact.analysis.pei.evaluation import set_level
from contreact.checkpoints.engines import engine_for
from contreact.checkpoints.registry import get_run
from contreact.stub import StubServer
from contreact.tools.memory import memory_snapshot
from contreact.tools.registry import MEMORY_TOOLS, OPERATOR_TOOL
from support.backends import Backend
from support.batches import run_batch
from support.cli import cli_in_process
from support.paths import ROOT

MODELS = ("stub-a", "stub-b")


@dataclass
class Made:
    backend: Backend
    run_ids: list[str]
    study: RunTables


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Made]:
    """Batch `s`: 2 models × 2 replicates × 3 cycles, one run rated by hand, loaded."""
    backend = Backend("sqlite", tmp_path_factory.mktemp("study") / "runs")
    with StubServer(models=list(MODELS)).start() as server:
        run_ids = run_batch(backend, server, "s", MODELS)
    engine = engine_for(backend.storage())
    set_level(backend.storage(), get_run(engine, run_ids[0]), "judge", 6)
    yield Made(backend, run_ids, contreact.load(batch="s", storage=backend.data_dir))


def generated_chars(response: dict[str, Any]) -> int:
    calls = response.get("tool_calls") or []
    return (
        len(response.get("content") or "")
        + len(response.get("thinking") or "")
        + sum(len(json.dumps(c.get("args") or {}, ensure_ascii=False)) for c in calls)
    )


def recount(lines: list[dict[str, Any]]) -> pd.DataFrame:
    """Table 1 per cycle counted again from raw events, as the paper defines each number."""
    rows: dict[tuple[str, int], dict[str, Any]] = {}
    memory: dict[str, dict[str, str]] = {}

    def row(run_id: str, cycle: int) -> dict[str, Any]:
        zero = {
            "steps": 0, "tool_calls": 0, "memory_ops_total": 0, "messages_to_operator": 0,
            "response_chars": 0, "memory_write_chars": 0, "tokens_in": 0, "tokens_out": 0,
        }  # fmt: skip
        return rows.setdefault((run_id, cycle), {"run_id": run_id, "cycle": cycle, **zero})

    for line in lines:
        run_id, cycle, kind = line["run_id"], line["cycle"], line["event_type"]
        payload = json.loads(line["payload"])
        mine = memory.setdefault(run_id, {})
        if kind == "LLM_INVOCATION":
            r = row(run_id, cycle)
            r["steps"] += 1
            r["response_chars"] += generated_chars(payload["response"])
            r["tokens_in"] += payload["tokens_in"]
            r["tokens_out"] += payload["tokens_out"]
        elif kind == "TOOL_CALL":
            r = row(run_id, cycle)
            name, ok = payload["tool_name"], not payload["error"] and not payload["refused"]
            r["tool_calls"] += 1
            r["memory_ops_total"] += name in MEMORY_TOOLS and not payload["refused"]
            r["messages_to_operator"] += name == OPERATOR_TOOL and ok
            if name == "write" and ok:
                r["memory_write_chars"] += len(payload["parameters"]["value"])
                mine[payload["parameters"]["key"]] = payload["parameters"]["value"]
            if name == "delete" and ok:
                del mine[payload["parameters"]["key"]]
        elif kind == "CYCLE_END":
            r = row(run_id, cycle)
            r["reflection"] = payload["final_reflection"]
            r["reflection_chars"] = len(payload["final_reflection"])
            r["final_memory_keys"] = len(mine)
    return pd.DataFrame([r for r in rows.values() if "reflection" in r])


def test_cycles_equal_a_recount_from_the_exported_events(made: Made, tmp_path: Path) -> None:
    out = tmp_path / "jsonl"
    result = cli_in_process(made.backend, "export", "--batch", "s", "--out", str(out))
    assert result.returncode == 0, result.stderr
    events = [
        json.loads(line) for line in (out / "events.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    counted = recount(events)
    cycles = made.study.cycles
    assert list(zip(cycles.run_id, cycles.cycle, strict=True)) == [
        (run_id, cycle) for run_id in made.run_ids for cycle in (1, 2, 3)
    ]
    assert cycles.memory_ops_total.sum() > 0 and cycles.messages_to_operator.sum() > 0
    assert_frame_equal(cycles[list(counted.columns)], counted, check_dtype=False)
    # Every table is written, one row per line, as the DataFrame has it.
    for name in TABLES:
        lines = (out / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()
        assert len(lines) == len(getattr(made.study, name)), name
        assert f"wrote {len(lines)} rows to {out / f'{name}.jsonl'}" in result.stderr


def test_the_parquet_export_reads_back_equal(made: Made, tmp_path: Path) -> None:
    out = tmp_path / "parquet"
    result = cli_in_process(
        made.backend, "export", "--batch", "s", "--format", "parquet", "--out", str(out)
    )
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in out.iterdir()) == sorted(f"{t}.parquet" for t in TABLES)
    for name, table in made.study.tables().items():
        assert_frame_equal(pd.read_parquet(out / f"{name}.parquet"), table, obj=name)


def test_the_study_tables(made: Made) -> None:
    study = made.study
    runs = study.runs.set_index("run_id")
    assert list(runs.index) == made.run_ids
    assert list(runs.model) == ["stub-a", "stub-a", "stub-b", "stub-b"]
    assert set(runs.batch) == {"s"} and set(runs.status) == {"completed"}
    assert list(runs["start.seed"]) == [42, 43, 42, 43]  # the RUN_START record, flattened
    assert list(runs["start.options.seed"]) == [42, 43, 42, 43]
    # Run totals are the sums of the cycles' numbers (final memory keys: the last cycle's).
    sums = study.cycles.groupby("run_id", sort=False)[["memory_ops_total", "response_chars"]]
    assert list(runs.memory_tool_ops) == list(sums.sum().memory_ops_total)
    assert list(runs.response_chars) == list(sums.sum().response_chars)
    # Memory at the end of the last cycle is the memory the run kept.
    engine = engine_for(made.backend.storage())
    for run_id in made.run_ids:
        mine = study.memory[study.memory.run_id == run_id]
        last = mine[mine.cycle == mine.cycle.max()]
        assert dict(zip(last.key, last.value, strict=True)) == memory_snapshot(engine, run_id)
        keys = mine.groupby("cycle").size()
        ends = study.cycles[study.cycles.run_id == run_id].set_index("cycle").final_memory_keys
        assert keys.reindex(ends.index, fill_value=0).tolist() == ends.tolist()
    calls = study.tool_calls
    assert len(calls) == study.cycles.tool_calls.sum()
    assert (calls.groupby("run_id", sort=False).size() == runs.total_tool_calls).all()
    assert len(study.events[study.events.event_type == "TOOL_CALL"]) == len(calls)
    (rating,) = study.pei.itertuples()
    assert (rating.run_id, rating.model, rating.evaluator, rating.level, rating.manual) == (
        made.run_ids[0], "stub-a", "judge", 6, True
    )  # fmt: skip


def test_load_by_run_ids_and_its_bad_input(made: Made) -> None:
    one = contreact.load(runs=made.run_ids[3], storage=made.backend.data_dir)
    assert list(one.runs.run_id) == [made.run_ids[3]]
    assert set(one.cycles.run_id) == {made.run_ids[3]} and one.pei.empty
    assert list(one.pei.columns) == list(made.study.pei.columns)
    with pytest.raises(ValueError, match="no runs belong to batch 'nope'"):
        contreact.load(batch="nope", storage=made.backend.data_dir)


def test_without_pandas_csv_exports_and_the_rest_says_what_to_install(
    made: Made, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def loaded_by(code: str) -> set[str]:
        done = subprocess.run(
            [sys.executable, "-c", f"{code}\nprint(*sys.modules)"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        return set(done.stdout.split())

    # `import contreact` stays cheap: `load` is imported when first used.
    assert not {m for m in loaded_by("import sys, contreact") if m.startswith("sqlalchemy")}
    # Neither the CLI nor the study module imports pandas before it is needed.
    loaded = loaded_by("import sys, contreact, contreact.cli.app, contreact.analysis.frames")
    assert "contreact.analysis.frames" in loaded and not loaded & {"pandas", "pyarrow"}

    monkeypatch.setitem(sys.modules, "pandas", None)  # importing it now raises ImportError
    out = tmp_path / "csv"
    assert (
        cli_in_process(
            made.backend, "export", "--batch", "s", "-f", "csv", "--out", str(out)
        ).returncode
        == 0
    )
    with (out / "cycles.csv").open(encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert (len(rows), len(rows[0])) == made.study.cycles.shape
    hint = "contreact's DataFrames and parquet need pandas and pyarrow: "
    hint += "pip install 'contreact[analysis]'"
    with pytest.raises(ImportError, match="pip install 'contreact\\[analysis\\]'"):
        contreact.load(batch="s", storage=made.backend.data_dir)
    bad = cli_in_process(made.backend, "export", "--batch", "s", "-f", "parquet", "-o", str(out))
    assert (bad.returncode, bad.stderr.strip()) == (2, f"contreact: {hint}")


def test_export_names_a_run_or_a_batch(made: Made) -> None:
    for args, message in (
        ([], "name a run, or a batch with --batch NAME (not both)"),
        ([made.run_ids[0], "--batch", "s"], "name a run, or a batch with --batch NAME"),
        (["--batch", "nope"], "no runs belong to batch 'nope'"),
        (["--batch", "s", "-f", "xml"], "unknown export format 'xml'; use one of: parquet, csv"),
        ([made.run_ids[0], "-f", "parquet"], "parquet holds a batch's tables: contreact export"),
    ):
        result = cli_in_process(made.backend, "export", *args)
        assert result.returncode == 2 and message in result.stderr, args
        assert len(result.stderr.strip().splitlines()) == 1


def test_load_finds_storage_as_the_cli_does(
    postgres_backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = postgres_backend
    with StubServer(models=["stub-a"]).start() as server:
        run_ids = run_batch(backend, server, "pg", ["stub-a"], replicates=1, cycles=2)
    assert backend.db_url is not None
    by_url = contreact.load(batch="pg", storage=backend.db_url)
    assert list(by_url.runs.run_id) == run_ids and list(by_url.cycles.cycle) == [1, 2]
    # No storage given: CONTREACT_DB_URL, as `contreact` without --db-url reads it.
    monkeypatch.setenv("CONTREACT_DB_URL", backend.db_url)
    assert_frame_equal(contreact.load(batch="pg").cycles, by_url.cycles)


def test_a_batch_exports_into_the_data_directory_by_default(made: Made) -> None:
    result = cli_in_process(made.backend, "export", "--batch", "s", "-f", "csv")
    assert result.returncode == 0, result.stderr
    folder = made.backend.data_dir / "exports" / "s"
    assert sorted(p.name for p in folder.iterdir()) == sorted(f"{t}.csv" for t in TABLES)
