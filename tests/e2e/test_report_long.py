"""`report` on long runs: windows of cycles in the plots, sampled heatmaps, a zoom.

A 10,000-cycle run has more cycles than a panel has pixels and more reflections than a
heatmap can label: the plots draw windows of cycles (mean, min-max) and the heatmaps an
even sample, and `report --cycles A-B` shows a range of cycles whole.
"""

from __future__ import annotations

import csv
import math
import re
import sys
from pathlib import Path

import pytest

from contreact.analysis.figures import per_model, per_run
from contreact.analysis.figures.trajectories import window_size
from contreact.analysis.report.collect import collect, evenly
from contreact.checkpoints.engines import engine_for
from contreact.checkpoints.registry import get_run
from support.backends import Backend
from support.cli import cli_in_process
from support.runs import write_config
from support.stub import scripted_stub

CYCLES = 12


def rows(run_id: str, values: list[float | None]) -> list[dict[str, object]]:
    return [
        {"run_id": run_id, "model": "m", "batch": "b", "cycle": c, "tokens_out": v}
        for c, v in enumerate(values, start=1)
    ]


def test_a_long_series_is_drawn_as_windows_of_cycles() -> None:
    values: list[float | None] = [float(c % 7) for c in range(1, 1001)]
    assert window_size(1000) == 4 and window_size(300) == 1
    metric = [("tokens_out", "Tokens out")]
    (line,) = per_run(rows("b.m.r1", values), metrics=metric).axes[0].get_lines()
    xs, ys = list(line.get_xdata()), list(line.get_ydata())
    assert len(xs) == 250 and xs[0] == 2.5 and ys[0] == (1 + 2 + 3 + 4) / 4
    assert xs[-1] == 998.5 and ys[-1] == sum(values[-4:]) / 4  # type: ignore[arg-type]
    # Two runs: each window's mean over the runs, its band over them.
    both = per_model(rows("b.m.r1", values) + rows("b.m.r2", values[::-1]), metrics=metric)
    assert len(both.axes[0].get_lines()[0].get_xdata()) == 250
    # A short run is drawn cycle by cycle; a missing value stays a gap.
    (short,) = per_run(rows("b.m.r1", [1.0, None, 3.0]), metrics=metric).axes[0].get_lines()
    assert list(short.get_xdata()) == [1, 2, 3] and math.isnan(short.get_ydata()[1])


def test_an_even_sample_keeps_the_first_and_the_last() -> None:
    picked = evenly(list(range(1, 10_001)), 200)
    gaps = {b - a for a, b in zip(picked, picked[1:], strict=False)}
    assert len(picked) == 200 and picked[0] == 1 and picked[-1] == 10_000
    assert max(gaps) - min(gaps) <= 1
    assert evenly([1, 2, 3], 200) == [1, 2, 3]


@pytest.fixture
def run(tmp_path: Path, sqlite_backend: Backend) -> Backend:
    script = {
        c: [{"content": f"Cycle {c}: note {'abcdefghijklmnop'[c]} " * (1 + c % 3)}]
        for c in range(1, CYCLES + 1)
    }
    with scripted_stub(script) as server:
        config = write_config(
            tmp_path / "run.yaml",
            sqlite_backend,
            run_id="long",
            cycles=CYCLES,
            ollama={"host": server.url},
        )
        assert cli_in_process(sqlite_backend, "run", str(config)).returncode == 0
    return sqlite_backend


def test_the_heatmap_compares_an_even_sample_of_a_long_run(
    run: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The package exports the function `collect`, which hides its module of that name.
    monkeypatch.setattr(sys.modules["contreact.analysis.report.collect"], "HEATMAP_CYCLES", 5)
    engine = engine_for(run.storage())
    data = collect(run.storage(), [get_run(engine, "long")], title="t", lexical=True)
    (shown,) = data.runs
    assert shown.similarity is not None
    assert shown.similarity.labels == [1, 4, 7, 9, 12] and shown.similarity_of == CYCLES
    assert len(shown.similarity.matrix) == 5 and len(shown.cycles) == CYCLES


def test_report_cycles_zooms_into_a_range(run: Backend, tmp_path: Path) -> None:
    out = tmp_path / "zoom"
    result = cli_in_process(run, "report", "long", "--cycles", "4-8", "--out", str(out))
    assert result.returncode == 0, result.stderr
    with (out / "cycles.csv").open(encoding="utf-8") as fh:
        assert [int(r["cycle"]) for r in csv.DictReader(fh)] == [4, 5, 6, 7, 8]
    assert "cycles 4-8" in (out / "report.md").read_text(encoding="utf-8")
    # Table 1 still sums the whole run.
    with (out / "table1_runs.csv").open(encoding="utf-8") as fh:
        assert int(next(csv.DictReader(fh))["cycles"]) == CYCLES
    for bad in ("8-4", "0-3", "x"):
        refused = cli_in_process(run, "report", "long", "--cycles", bad, "--out", str(out))
        assert refused.returncode == 2 and "--cycles" in refused.stderr


def test_show_cycles_prints_only_that_range(run: Backend) -> None:
    shown = cli_in_process(run, "show", "long", "--cycles", "3-4")
    assert shown.returncode == 0, shown.stderr
    assert [line for line in shown.stdout.splitlines() if re.fullmatch(r"Cycle \d+", line)] == [
        "Cycle 3",
        "Cycle 4",
    ]
    assert "Cycle 12" in cli_in_process(run, "show", "long", "--cycles", "12-").stdout
    empty = cli_in_process(run, "show", "long", "--cycles", "20-")
    assert empty.returncode == 0 and "no completed cycles in cycles 20-" in empty.stdout
