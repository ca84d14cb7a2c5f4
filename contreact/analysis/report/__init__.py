"""`contreact report`: tables, plots and one self-contained HTML page for runs or a batch.

A researcher wants the numbers in three forms: CSV to compute with, Markdown to paste
into notes or a paper draft, and a single HTML file to look at and send around. The
HTML embeds its images as data URIs and carries its CSS inline, with no script, so it
opens the same offline, from an e-mail, or years later. Everything is computed from the
stored cycles, events and PEI ratings; nothing is sent to a model, except that a run
configured with an embedding model has its reflection-similarity heatmap embedded the
same way the monitor did (falling back to TF-IDF, and saying so, when it is unreachable).

One stage per module: `collect` reads the runs, `tables` and `plots` format them,
`render` writes Markdown and HTML; this module writes the files.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contreact.analysis.csv_writer import columns_of, write_csv
from contreact.analysis.pei.self_rating import self_vs_cross
from contreact.analysis.report.collect import ReportData, RunData, collect
from contreact.analysis.report.plots import (
    plot_cycles,
    plot_pei,
    plot_self_cross,
    plot_similarity,
)
from contreact.analysis.report.render import render_html, render_markdown
from contreact.analysis.report.tables import markdown_table, model_rows, run_rows, whole
from contreact.checkpoints.registry import RunRecord
from contreact.checkpoints.storage import Storage

__all__ = [
    "ReportData",
    "ReportFiles",
    "RunData",
    "build_report",
    "collect",
    "markdown_table",
    "write_report",
]


@dataclass(frozen=True)
class ReportFiles:
    """The files a report wrote."""

    out_dir: Path
    html: Path
    markdown: Path
    csv: list[Path]
    png: list[Path]


def write_report(data: ReportData, out_dir: Path) -> ReportFiles:
    """Write CSV, Markdown, PNG and HTML files of `data` into `out_dir` (created)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    csvs: list[Path] = []

    def save_csv(
        name: str, rows: list[dict[str, Any]], columns: Sequence[str] | None = None
    ) -> None:
        path = out_dir / name
        with path.open("w", encoding="utf-8", newline="") as fh:
            write_csv(rows, fh, columns)
        csvs.append(path)

    cycles = [row for d in data.runs for row in d.cycles]
    save_csv("cycles.csv", cycles, columns_of(cycles) or ["run_id", "cycle"])
    save_csv("table1_runs.csv", run_rows(data))
    save_csv("table1_models.csv", model_rows(data))
    if data.pei is not None:
        save_csv(
            "pei_results.csv",
            [
                {
                    "run_id": r.run_id,
                    "evaluator": r.evaluator,
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
            ],
        )
        matrix = data.pei
        save_csv(
            "pei_matrix.csv",
            [
                {
                    "history": label,
                    "model": model,
                    **dict(zip(matrix.columns, map(whole, row), strict=True)),
                    "stale": "; ".join(
                        f"{s.evaluator} (level {s.level}, rated at cycle {s.at_cycle} "
                        f"of {s.last_cycle})"
                        for s in matrix.stale
                        if s.run_id == label
                    ),
                }
                for label, model, row in zip(
                    matrix.rows, matrix.row_models, matrix.cells, strict=True
                )
            ],
            ["history", "model", *matrix.columns, "stale"],
        )
        by_model = matrix.by_model()
        save_csv(
            "pei_model_matrix.csv",
            [
                {"model": label, **dict(zip(by_model.columns, row, strict=True))}
                for label, row in zip(by_model.rows, by_model.cells, strict=True)
            ],
            ["model", *by_model.columns],
        )
        save_csv(
            "pei_self_vs_cross.csv",
            [
                {
                    "model": f.model,
                    "histories": f.histories,
                    "self_mean": f.self_mean,
                    "cross_mean": f.cross_mean,
                    "self_minus_cross": f.difference,
                    "p_value": f.p_value,
                    "smallest_p": f.min_p,
                    "p_exact": f.exact,
                }
                for f in self_vs_cross(matrix)
            ],
            [
                "model",
                "histories",
                "self_mean",
                "cross_mean",
                "self_minus_cross",
                "p_value",
                "smallest_p",
                "p_exact",
            ],
        )

    images: list[tuple[str, str, bytes]] = []
    if any(d.cycles for d in data.runs):
        images.append(("per_cycle_metrics.png", "Per-cycle metrics", plot_cycles(data)))
    for d in data.runs:
        if d.similarity is not None:
            alt = f"Reflection similarity of {d.run.run_id} ({d.similarity.method})"
            images.append(
                (
                    f"similarity_{d.run.run_id}.png",
                    alt,
                    plot_similarity(d.run.run_id, d.similarity, d.similarity_of),
                )
            )
    if data.pei is not None:
        images.append(("pei_matrix.png", "PEI matrix per run", plot_pei(data.pei)))
        images.append(
            (
                "pei_model_matrix.png",
                "PEI matrix: history model × evaluator model",
                plot_pei(data.pei.by_model(), by_model=True),
            )
        )
        figures = self_vs_cross(data.pei)
        if any(f.differences for f in figures):
            images.append(
                (
                    "pei_self_vs_cross.png",
                    "PEI self vs cross: each model's self-rating minus the other evaluators' "
                    "rating of its histories",
                    plot_self_cross(figures),
                )
            )
    pngs = []
    for name, _, png in images:
        path = out_dir / name
        path.write_bytes(png)
        pngs.append(path)

    markdown = out_dir / "report.md"
    markdown.write_text(render_markdown(data, [(n, a) for n, a, _ in images]), encoding="utf-8")
    page = out_dir / "report.html"
    page.write_text(render_html(data, images), encoding="utf-8")
    return ReportFiles(out_dir=out_dir, html=page, markdown=markdown, csv=csvs, png=pngs)


def build_report(
    storage: Storage,
    runs: Sequence[RunRecord],
    out_dir: Path,
    *,
    title: str,
    lexical: bool = False,
    cycles: tuple[int, int] | None = None,
) -> ReportFiles:
    """Collect and write the report of `runs` into `out_dir` (see `collect` for `cycles`)."""
    data = collect(storage, runs, title=title, lexical=lexical, cycles=cycles)
    return write_report(data, out_dir)
