"""`contreact export RUN --format jsonl|csv`: the event log and the per-cycle table."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from typer.testing import CliRunner

from contreact.checkpoints.cycles import cycle_records
from contreact.checkpoints.engines import engine_for
from contreact.checkpoints.event_store import read_events
from contreact.cli import app
from contreact.config import parse_config
from contreact.engine.runner import start_run
from support.backends import Backend
from support.cli import cli
from support.runs import read_log
from support.stub import scripted_stub

SCRIPT = {
    1: [
        {"tool_calls": [{"name": "write", "arguments": {"key": "k", "value": "v, with a comma"}}]},
        {"tool_calls": [{"name": "list", "arguments": {}}]},
        {"content": 'First note: "quoted", two\nlines.'},
    ],
    2: [{"content": "Second note."}],
}


def make_run(backend: Backend) -> None:
    with scripted_stub(SCRIPT) as server:
        config = parse_config(
            {
                "run_id": "exp",
                "model": "stub-model",
                "cycles": 2,
                "ollama": {"host": server.url, "timeout_s": 20, "retries": 2},
                "storage": backend.storage_yaml(),
            },
            "test",
        )
        assert start_run(config, backend.storage()).status == "completed"


def in_process(backend: Backend, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, [*backend.cli_args, *args])
    return result.exit_code, result.stdout, result.stderr


def test_export_jsonl_and_csv(sqlite_backend: Backend, tmp_path: Path) -> None:
    backend = sqlite_backend
    make_run(backend)
    engine = engine_for(backend.storage())

    code, out, _ = in_process(backend, "export", "exp", "--format", "jsonl")
    assert code == 0
    lines = [json.loads(line) for line in out.splitlines()]
    assert lines == read_events(engine, "exp") == read_log(backend, "exp")
    assert {line["event_type"] for line in lines} >= {"RUN_START", "TOOL_CALL", "CYCLE_END"}
    # jsonl is the default format
    assert in_process(backend, "export", "exp")[1] == out

    code, out, _ = in_process(backend, "export", "exp", "--format", "csv")
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    records = cycle_records(engine, "exp")
    assert [int(r["cycle"]) for r in rows] == [1, 2]
    for row, record in zip(rows, records, strict=True):
        assert row["run_id"] == "exp" and row["model"] == "stub-model"
        assert row["reflection"] == record.reflection
        for key in ("steps", "tool_calls", "memory_ops_total", "response_chars", "tokens_in"):
            assert int(row[key]) == record.metrics[key], key
    assert (rows[0]["calls_write"], rows[0]["calls_list"], rows[0]["calls_read"]) == ("1", "1", "0")
    assert rows[0]["memory_write_chars"] == str(len("v, with a comma"))

    target = tmp_path / "sub" / "exp.csv"
    code, _, err = in_process(backend, "export", "exp", "-f", "csv", "--out", str(target))
    assert code == 0 and "wrote 2 rows" in err
    assert target.read_text(encoding="utf-8") == out
    assert list(target.parent.iterdir()) == [target]


def test_export_bad_input(sqlite_backend: Backend, tmp_path: Path) -> None:
    backend = sqlite_backend
    make_run(backend)
    # The real command line: exit 2, one line, and no file left behind.
    target = tmp_path / "never.xml"
    bad = cli(backend, "export", "exp", "--format", "xml", "--out", str(target))
    assert bad.returncode == 2
    assert bad.stderr.strip() == "contreact: unknown export format 'xml'; use one of: jsonl, csv"
    assert not target.exists() and list(tmp_path.iterdir()) == [backend.data_dir]
    code, _, err = in_process(backend, "export", "nope", "--format", "csv")
    assert code == 2 and "no run named nope" in err and len(err.strip().splitlines()) == 1
