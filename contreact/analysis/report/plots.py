"""Plots: the report's figures, drawn by `analysis.figures` (the notebook's functions too).

This module only chooses what the report shows and names each figure; the drawing, the
style and the colours are `analysis.figures`', so a figure in the report and the same one
drawn in a notebook look alike. A model keeps one colour in every figure of the report:
the report's model order decides it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from matplotlib.figure import Figure

from contreact.analysis.figures import pei_heatmap, per_model, per_run, self_cross
from contreact.analysis.figures import similarity_heatmap as draw_similarity
from contreact.analysis.pei.matrix import PeiMatrix
from contreact.analysis.report.collect import ReportData, RunData


@dataclass(frozen=True)
class ReportFigure:
    """One figure of the report: its file stem, its caption, and how to draw it.

    Drawn when written, one at a time: a batch of a hundred runs has a hundred heatmaps,
    and only one is held at once.
    """

    stem: str
    caption: str
    draw: Callable[[], Figure]


def cycle_rows(data: ReportData) -> list[dict[str, object]]:
    """Every run's per-cycle rows, each with its run's batch."""
    return [{**row, "batch": d.run.batch} for d in data.runs for row in d.cycles]


def similarity_figure(d: RunData) -> ReportFigure | None:
    """A run's reflection-similarity heatmap (None: fewer than two reflections)."""
    similarity = d.similarity
    if similarity is None:
        return None
    n = len(similarity.labels)
    sampled = f"; {n} of {d.similarity_of} cycles, evenly spaced" if d.similarity_of > n else ""
    caption = f"Reflection similarity of {d.run.run_id} ({similarity.method}{sampled})"
    return ReportFigure(
        f"similarity_{d.run.run_id}",
        caption,
        lambda: draw_similarity(
            similarity.labels,
            similarity.matrix,
            note=f"similarity method: {similarity.method}{sampled}",
        ),
    )


def _pei(matrix: PeiMatrix, *, by_model: bool) -> Figure:
    self_cells = [
        (i, j) for i in range(len(matrix.rows)) if (j := matrix.self_column(i)) is not None
    ]
    stale: dict[tuple[int, int], str] = {}
    if not by_model:
        for i in range(len(matrix.rows)):
            for j in range(len(matrix.columns)):
                found = matrix.stale_at(i, j)
                if found is not None:
                    stale[(i, j)] = f"({'–' if found.level is None else found.level})"
    return pei_heatmap(
        matrix.cells,
        matrix.rows,
        matrix.columns,
        self_cells=self_cells,
        stale=stale,
        row_label="history model" if by_model else "history (run)",
    )


def report_figures(data: ReportData) -> list[ReportFigure]:
    """Every figure of the report, in the order the report shows them."""
    found: list[ReportFigure] = []
    rows = cycle_rows(data)
    models = data.model_order
    if rows:
        found.append(
            ReportFigure(
                "per_cycle_metrics",
                "Per-cycle metrics: each model's mean over its runs, with the 95 % "
                "bootstrap interval over runs shaded",
                lambda: per_model(rows, models=models, seed=data.seed),
            )
        )
        found.append(
            ReportFigure(
                "per_cycle_runs",
                "Per-cycle metrics of every run (colour: model; fainter: later replicate)",
                lambda: per_run(rows, models=models),
            )
        )
    for d in data.runs:
        figure = similarity_figure(d)
        if figure is not None:
            found.append(figure)
    if data.pei is not None:
        matrix = data.pei
        found.append(
            ReportFigure("pei_matrix", "PEI matrix per run", lambda: _pei(matrix, by_model=False))
        )
        found.append(
            ReportFigure(
                "pei_model_matrix",
                "PEI matrix: history model × evaluator model (self-ratings outlined)",
                lambda: _pei(matrix.by_model(), by_model=True),
            )
        )
        figures = data.self_cross
        if any(f.differences for f in figures):
            found.append(
                ReportFigure(
                    "pei_self_vs_cross",
                    "PEI self vs cross: each model's self-rating minus the other evaluators' "
                    "rating of its histories, with the 95 % bootstrap interval of the mean",
                    lambda: self_cross(figures, models=models),
                )
            )
    return found
