"""The report's files: CSV to compute with, LaTeX to paste, figures in three formats, pages.

Every CSV goes through `csv_writer` (cells a spreadsheet could run are neutralised); each
LaTeX table is written beside the CSV of the same numbers, and `tables.tex` holds them all
in a document that compiles on its own; each figure is written as PDF, SVG and a 300 dpi
PNG, drawn one at a time. The Markdown and HTML pages come last, from the same data.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contreact.analysis import latex
from contreact.analysis.comparisons import Comparison
from contreact.analysis.csv_writer import columns_of, write_csv
from contreact.analysis.figures.style import render
from contreact.analysis.pei.matrix import PeiMatrix
from contreact.analysis.report.collect import ReportData
from contreact.analysis.report.plots import report_figures
from contreact.analysis.report.render import render_html, render_markdown
from contreact.analysis.report.statistics import (
    AGREEMENT_COLUMNS,
    agreement_rows,
    comparison_notes,
    difference_rows,
    difference_table,
    retest_rows,
    trajectory_rows,
)
from contreact.analysis.report.table1 import model_notes, model_rows, model_table, run_rows
from contreact.analysis.report.tables import pei_table, whole


@dataclass(frozen=True)
class ReportFiles:
    """The files a report wrote."""

    out_dir: Path
    html: Path
    markdown: Path
    csv: list[Path]
    tex: list[Path]
    figures: list[Path]
    """Every figure file: PDF, SVG and PNG of each."""

    @property
    def png(self) -> list[Path]:
        """The figures' PNG files."""
        return [p for p in self.figures if p.suffix == ".png"]


def comparison_stem(comparison: Comparison) -> str:
    """`comparison_<b>_vs_<a>` for batches, `comparison_models` for models."""
    if comparison.kind == "models" or not comparison.rows:
        return "comparison_models" if comparison.kind == "models" else "comparison_batches"
    first = comparison.rows[0]
    return f"comparison_{first.b}_vs_{first.a}"


def _pei_rows(data: ReportData) -> dict[str, tuple[list[dict[str, Any]], list[str]]]:
    """The PEI CSVs: name -> (rows, columns)."""
    matrix = data.pei
    assert matrix is not None
    results = [
        {
            "run_id": r.run_id,
            "evaluator": r.evaluator,
            "repeat": r.repeat,
            "level": r.level,
            "reason": r.reason,
            "manual": r.manual,
            "omitted": r.omitted_text(),
            "at_cycle": r.at_cycle,
            "run_last_cycle": data.last_cycles.get(r.run_id, r.at_cycle),
            "stale": r.is_stale(data.last_cycles.get(r.run_id, r.at_cycle)),
            "options": r.options or "",
            "instrument_sha": r.instrument_sha,
            "answer": r.answer,
        }
        for r in data.pei_results
    ]
    runs = [
        {
            "history": label,
            "model": model,
            **dict(zip(matrix.columns, map(whole, row), strict=True)),
            "stale": "; ".join(
                f"{s.evaluator} (level {s.level}, rated at cycle {s.at_cycle} of {s.last_cycle})"
                for s in matrix.stale
                if s.run_id == label
            ),
        }
        for label, model, row in zip(matrix.rows, matrix.row_models, matrix.cells, strict=True)
    ]
    by_model = matrix.by_model()
    models = [
        {"model": label, **dict(zip(by_model.columns, row, strict=True))}
        for label, row in zip(by_model.rows, by_model.cells, strict=True)
    ]
    figures = [
        {
            "model": f.model,
            "histories": f.histories,
            "self_mean": f.self_mean,
            "cross_mean": f.cross_mean,
            "self_minus_cross": f.difference,
            "ci_low": f.interval.low if f.interval else None,
            "ci_high": f.interval.high if f.interval else None,
            "interval_method": f.interval.method if f.interval else "",
            "p_value": f.p_value,
            "smallest_p": f.min_p,
            "p_exact": f.exact,
        }
        for f in data.self_cross
    ]
    figure_columns = ["model", "histories", "self_mean", "cross_mean", "self_minus_cross"]
    figure_columns += ["ci_low", "ci_high", "interval_method", "p_value", "smallest_p", "p_exact"]
    return {
        "pei_results.csv": (results, columns_of(results) or ["run_id", "evaluator", "level"]),
        "pei_matrix.csv": (runs, ["history", "model", *matrix.columns, "stale"]),
        "pei_model_matrix.csv": (models, ["model", *by_model.columns]),
        "pei_self_vs_cross.csv": (figures, figure_columns),
        "pei_agreement.csv": (agreement_rows(data.agreement), list(AGREEMENT_COLUMNS)),
        "pei_test_retest.csv": (retest_rows(data), ["evaluator", "repeats", *AGREEMENT_COLUMNS]),
    }


def _latex_tables(data: ReportData) -> dict[str, str]:
    """Each LaTeX table by file stem."""
    headers, body = model_table(data)
    found = {
        "table1_models": latex.table(
            headers,
            body,
            caption="By model: the mean over runs [95 % bootstrap interval over runs]; "
            "characters in thousands.",
            label=latex.label_of("table1_models"),
            notes=model_notes(data),
        )
    }
    comparisons = [*data.batch_comparisons]
    if data.model_comparison is not None:
        comparisons.append(data.model_comparison)
    for comparison in comparisons:
        stem = comparison_stem(comparison)
        found[stem] = latex.table(
            *difference_table(comparison),
            caption=comparison.title,
            label=latex.label_of(stem),
            notes=comparison_notes(comparison),
            first_left=2,
        )
    if data.pei is not None:
        for stem, matrix, caption in (
            ("pei_matrix", data.pei, "PEI levels: history (run) × evaluator."),
            (
                "pei_model_matrix",
                data.pei.by_model(),
                "PEI levels: history model × evaluator model (mean over replicates; the "
                "diagonal holds the self-ratings).",
            ),
        ):
            found[stem] = latex.table(
                *pei_table(matrix),
                caption=caption,
                label=latex.label_of(stem),
                notes=matrix.notes() if isinstance(matrix, PeiMatrix) else [],
            )
    return found


def write_report(data: ReportData, out_dir: Path) -> ReportFiles:
    """Write the CSV, LaTeX, figure, Markdown and HTML files of `data` into `out_dir`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    csvs: list[Path] = []

    def save_csv(name: str, rows: list[dict[str, Any]], columns: Sequence[str] = ()) -> None:
        path = out_dir / name
        with path.open("w", encoding="utf-8", newline="") as fh:
            write_csv(rows, fh, list(columns) or None)
        csvs.append(path)

    cycles = [row for d in data.runs for row in d.cycles]
    save_csv("cycles.csv", cycles, columns_of(cycles) or ["run_id", "cycle"])
    save_csv("table1_runs.csv", run_rows(data))
    save_csv("table1_models.csv", model_rows(data))
    trajectories = trajectory_rows(data)
    save_csv("trajectories.csv", trajectories, columns_of(trajectories) or ["batch", "model"])
    for comparison in [*data.batch_comparisons, *filter(None, [data.model_comparison])]:
        rows = difference_rows(comparison)
        save_csv(f"{comparison_stem(comparison)}.csv", rows, columns_of(rows) or ["metric"])
    if data.pei is not None:
        for name, (rows, columns) in _pei_rows(data).items():
            save_csv(name, rows, columns)

    tex = []
    tables = _latex_tables(data)
    for stem, text in tables.items():
        path = out_dir / f"{stem}.tex"
        path.write_text(text, encoding="utf-8")
        tex.append(path)
    standalone = out_dir / "tables.tex"
    standalone.write_text(latex.standalone(list(tables.values())), encoding="utf-8")
    tex.append(standalone)

    written: list[Path] = []
    images: list[tuple[str, str, bytes]] = []
    for figure in report_figures(data):
        formats = render(figure.draw())
        for fmt, content in formats.items():
            path = out_dir / f"{figure.stem}.{fmt}"
            path.write_bytes(content)
            written.append(path)
        images.append((f"{figure.stem}.png", figure.caption, formats["png"]))

    markdown = out_dir / "report.md"
    markdown.write_text(render_markdown(data, [(n, a) for n, a, _ in images]), encoding="utf-8")
    page = out_dir / "report.html"
    page.write_text(render_html(data, images), encoding="utf-8")
    return ReportFiles(out_dir, page, markdown, csvs, tex, written)
