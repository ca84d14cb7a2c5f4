"""Heatmaps: PEI levels (histories x evaluators) and the similarity of a run's reflections.

Every number printed in a cell is at least 8 pt at print size, so a figure grows with its
matrix (up to two columns wide) and leaves the numbers out when the cells would be too
small for them. In a PEI matrix the self-ratings (an evaluator rating a history its own
model lived) are outlined, inside their cell so the edge never clips them, and a legend
below the matrix says what the outline means; a stale rating (its run went on after it)
is shown in brackets and explained there too.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from contreact.analysis.figures.style import (
    FONT_SIZE,
    ONE_COLUMN,
    TWO_COLUMN,
    figure,
    finish,
    legend_below,
    styled,
)

CELL = 0.42
"""Inches per cell when numbers are printed in it (a `5.5` at 8 pt fits)."""
LABELLED_TICKS = 40
"""The most rows or columns that get a label each; past it about 10, evenly spaced."""


def _ticks(count: int) -> list[int]:
    if count <= LABELLED_TICKS:
        return list(range(count))
    step = math.ceil(count / 10)
    return list(range(0, count, step))


def _number(value: float, digits: int) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.{digits}f}"


def _annotate(ax: object, grid: np.ndarray, vmin: float, vmax: float, digits: int) -> None:
    for (i, j), value in np.ndenumerate(grid):
        if not math.isnan(value):
            # Dark text on the light (high) end of viridis, light text on the dark end.
            shade = "black" if value > vmin + 0.55 * (vmax - vmin) else "white"
            ax.text(j, i, _number(value, digits), ha="center", va="center", color=shade)  # type: ignore[attr-defined]


ROW = 0.3
"""Inches per row when numbers are printed in it."""


def _size(rows: int, columns: int, annotated: bool, label_room: float) -> tuple[float, float]:
    """A figure one column wide, or two for a wide matrix; rows decide the height."""
    cell = CELL if annotated else min(CELL, 5.0 / max(rows, columns, 1))
    row = ROW if annotated else min(ROW, 5.0 / max(rows, 1))
    width = min(TWO_COLUMN, max(ONE_COLUMN, columns * cell + label_room + 1.0))
    height = min(9.0, max(2.6, rows * row + label_room + 1.4))
    return width, height


def pei_heatmap(
    cells: Sequence[Sequence[float | None]],
    rows: Sequence[str],
    columns: Sequence[str],
    *,
    self_cells: Sequence[tuple[int, int]] = (),
    stale: dict[tuple[int, int], str] | None = None,
    row_label: str = "history",
) -> Figure:
    """PEI levels, histories (runs, or the models that lived them) x evaluator models.

    Args:
        cells: Levels; None where there is none.
        rows: Row labels.
        columns: Evaluator models.
        self_cells: `(row, column)` of self-ratings, outlined.
        stale: `(row, column)` -> text of a stale rating, shown in its empty cell.
        row_label: The y-axis label.
    """
    stale = stale or {}
    grid = np.asarray([[math.nan if v is None else float(v) for v in row] for row in cells])
    grid = grid.reshape(len(rows), len(columns))
    annotated = len(rows) <= 25 and len(columns) <= 14
    longest = max((len(label) for label in [*rows, *columns]), default=4)
    with styled():
        fig = figure(*_size(len(rows), len(columns), annotated, min(2.2, 0.06 * longest)))
        ax = fig.subplots()
        ax.grid(False)
        image = ax.imshow(grid, vmin=1.0, vmax=10.0, cmap="viridis", aspect="auto")
        fig.colorbar(image, ax=ax, label="PEI level", shrink=0.9)
        xs, ys = _ticks(len(columns)), _ticks(len(rows))
        ax.set_xticks(xs, labels=[columns[i] for i in xs], rotation=40, ha="right")
        ax.set_yticks(ys, labels=[rows[i] for i in ys])
        ax.set_xlabel("evaluator")
        ax.set_ylabel(row_label)
        if annotated:
            _annotate(ax, grid, 1.0, 10.0, 1)
            for (i, j), text in stale.items():
                ax.text(j, i, text, ha="center", va="center", color="grey")
        for i, j in self_cells:
            ax.add_patch(
                Rectangle(
                    (j - 0.45, i - 0.45), 0.9, 0.9, fill=False, edgecolor="#D55E00", linewidth=1.6
                )
            )
        handles: list[object] = []
        labels: list[str] = []
        if self_cells:
            handles.append(Patch(fill=False, edgecolor="#D55E00", linewidth=1.6))
            labels.append("self-rating (its own model's history)")
        if stale:
            handles.append(Patch(color="white", alpha=0.0))
            labels.append("(n) stale rating, left out of the means")
        legend_below(fig, handles, labels)
    return finish(fig)


def similarity_heatmap(
    labels: Sequence[int | str],
    matrix: Sequence[Sequence[float]],
    *,
    note: str = "",
) -> Figure:
    """Cosine similarity of a run's reflections, cycle x cycle (numbers when they fit).

    `note` goes under the matrix (the method, and whether the cycles were sampled).
    """
    n = len(labels)
    grid = np.asarray(matrix, dtype=np.float64).reshape(n, n)
    annotated = n <= 14
    with styled():
        fig = figure(*_size(n, n, annotated, 0.5))
        ax = fig.subplots()
        ax.grid(False)
        image = ax.imshow(grid, vmin=0.0, vmax=1.0, cmap="viridis", aspect="auto")
        fig.colorbar(image, ax=ax, label="cosine similarity", shrink=0.9)
        ticks = _ticks(n)
        names = [str(c) for c in labels]
        ax.set_xticks(ticks, labels=[names[i] for i in ticks], rotation=90 if n > 14 else 0)
        ax.set_yticks(ticks, labels=[names[i] for i in ticks])
        ax.set_xlabel("cycle")
        ax.set_ylabel("cycle")
        if annotated:
            _annotate(ax, grid, 0.0, 1.0, 2)
        if note:
            fig.supxlabel(note, fontsize=FONT_SIZE)
    return finish(fig)
