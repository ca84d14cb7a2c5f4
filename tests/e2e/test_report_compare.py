"""`contreact report --batch A --batch B`: two studies side by side, runs of other lengths apart.

Batch `a` and batch `b` ran the same model; one run of `b` was extended by a cycle. The
report covers both batches, gives each its own Table 1 column, and never averages the
extended run with the shorter one: it shows each length apart and says so.
"""

from __future__ import annotations

import csv
from pathlib import Path

from contreact.stub import StubServer
from support.backends import Backend
from support.batches import run_batch
from support.cli import cli_in_process


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


def test_two_batches_side_by_side_and_lengths_never_pooled(
    sqlite_backend: Backend, tmp_path: Path
) -> None:
    backend = sqlite_backend
    with StubServer(models=["stub-model"]).start() as server:
        a = run_batch(backend, server, "a", ["stub-model"], cycles=2)
        b = run_batch(backend, server, "b", ["stub-model"], cycles=2)
        more = cli_in_process(backend, "resume", b[0], "--cycles", "1", "-q")
        assert more.returncode == 0, more.stderr
    out = tmp_path / "report"
    args = ("report", "--batch", "a", "--batch", "b", "--out", str(out))
    result = cli_in_process(backend, *args, timeout=600)  # figures in three formats: slow when busy
    assert result.returncode == 0, result.stderr
    assert "Report of 4 run(s)" in result.stdout

    runs = read_csv(out / "table1_runs.csv")
    assert [(r["run_id"], r["batch"], r["cycles"]) for r in runs] == [
        (a[0], "a", "2"), (a[1], "a", "2"), (b[0], "b", "3"), (b[1], "b", "2")
    ]  # fmt: skip
    models = read_csv(out / "table1_models.csv")
    assert [(m["batch"], m["model"], m["cycles"], m["run_ids"]) for m in models] == [
        ("a", "stub-model", "2", f"{a[0]} {a[1]}"),
        ("b", "stub-model", "2", b[1]),
        ("b", "stub-model", "3", b[0]),
    ]
    # Each group's mean is its own runs' value: nothing of another batch or length in it.
    by_run = {r["run_id"]: r for r in runs}
    assert float(models[1]["response_chars_mean"]) == float(by_run[b[1]]["response_chars"])
    assert float(models[2]["response_chars_mean"]) == float(by_run[b[0]]["response_chars"])

    markdown = (out / "report.md").read_text(encoding="utf-8")
    assert markdown.startswith("# contreact report: batches a and b\n")
    header = next(line for line in markdown.splitlines() if line.startswith("| Metric |"))
    assert header == (
        "| Metric | a · stub-model (n=2) | b · stub-model · 2 cycles (n=1) "
        "| b · stub-model · 3 cycles (n=1) |"
    )
    note = "Runs of b · stub-model differ in length (2, 3 cycles): "
    note += "Table 1 shows each length apart, never pooled."
    assert note in markdown
    assert "Batches side by side: a, b; each column is one batch's runs." in markdown
    assert note in (out / "report.html").read_text(encoding="utf-8")
