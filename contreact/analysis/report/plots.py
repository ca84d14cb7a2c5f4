"""Plots: the report's figures as PNG bytes (matplotlib's object API, no global state)."""

from __future__ import annotations

import io
import math
from collections.abc import Sequence

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.ticker import MaxNLocator

from contreact.analysis.pei.matrix import PeiMatrix
from contreact.analysis.pei.self_rating import SelfCross
from contreact.analysis.report.collect import ReportData
from contreact.analysis.similarity import PairwiseSimilarity
from contreact.checkpoints.registry import RunRecord

PLOTTED: tuple[tuple[str, str], ...] = (
    ("memory_ops_total", "Memory tool ops"),
    ("messages_to_operator", "Messages to operator"),
    ("final_memory_keys", "Memory keys (end of cycle)"),
    ("reflection_chars", "Reflection chars"),
    ("response_chars", "Response chars"),
    ("memory_write_chars", "Memory written chars"),
    ("tokens_out", "Tokens out"),
    ("similarity", "Max similarity to earlier reflections"),
)
"""Per-cycle metrics in the per-cycle plot, one panel each."""


def _png(fig: Figure) -> bytes:
    FigureCanvasAgg(fig)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    return buffer.getvalue()


POINTS_PER_PANEL = 300
"""The most points a run's line has in a panel (a panel is about 400 pixels wide): a longer
run is drawn as the mean per window of consecutive cycles, its minimum to maximum shaded."""


def windows(
    cycles: Sequence[int], values: Sequence[float], most: int = POINTS_PER_PANEL
) -> tuple[int, list[float], list[float], list[float], list[float]]:
    """Cycles and values as at most `most` windows of consecutive cycles.

    Returns:
        The window's length in cycles (1: every cycle as it is), and per window the mean
        cycle, the mean, the minimum and the maximum of the values (NaN where a window
        has none).
    """
    size = max(1, math.ceil(len(cycles) / most))
    xs: list[float] = []
    means: list[float] = []
    lows: list[float] = []
    highs: list[float] = []
    for start in range(0, len(cycles), size):
        xs.append(sum(cycles[start : start + size]) / len(cycles[start : start + size]))
        known = [v for v in values[start : start + size] if not math.isnan(v)]
        means.append(sum(known) / len(known) if known else math.nan)
        lows.append(min(known) if known else math.nan)
        highs.append(max(known) if known else math.nan)
    return size, xs, means, lows, highs


def plot_cycles(data: ReportData) -> bytes:
    """Per-cycle metrics: one panel per metric, one line per run (colour by model).

    When batches are compared, each batch's runs of a model have a colour of their own.
    A run with more cycles than `POINTS_PER_PANEL` is drawn per window of cycles (mean,
    min-max band), and the title says how many cycles a window holds.
    """
    fig = Figure(figsize=(16, 7.5), layout="constrained")
    axes = fig.subplots(2, 4).flatten()
    by_batch = len({d.run.batch for d in data.runs}) > 1

    def group(run: RunRecord) -> tuple[str | None, str]:
        return (run.batch if by_batch else None, run.model)

    groups = list(dict.fromkeys(group(d.run) for d in data.runs))
    colours = {g: f"C{i % 10}" for i, g in enumerate(groups)}
    styles = ["-", "--", ":", "-."]
    seen: dict[tuple[str | None, str], int] = {}
    seeds = {m.run_id: m.seed for m in data.methods.runs} if data.methods else {}
    widest = 1
    for d in data.runs:
        index = seen.get(group(d.run), 0)
        seen[group(d.run)] = index + 1
        cycles = [row["cycle"] for row in d.cycles]
        for ax, (key, _) in zip(axes, PLOTTED, strict=True):
            values = [row.get(key) for row in d.cycles]
            ys = [math.nan if v is None else float(v) for v in values]
            size, xs, means, lows, highs = windows(cycles, ys)
            widest = max(widest, size)
            ax.plot(
                xs,
                means,
                marker="o" if size == 1 else None,
                markersize=3,
                linestyle=styles[index % len(styles)],
                color=colours[group(d.run)],
                label=f"{d.run.run_id} (seed {seeds.get(d.run.run_id, '?')})",
            )
            if size > 1:
                ax.fill_between(xs, lows, highs, color=colours[group(d.run)], alpha=0.2, lw=0)
    for ax, (key, label) in zip(axes, PLOTTED, strict=True):
        if key != "similarity":
            ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_title(label, fontsize=10)
        ax.set_xlabel("cycle", fontsize=8)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.tick_params(labelsize=8)
        ax.grid(alpha=0.3)
    if len(data.runs) <= 20:
        axes[0].legend(fontsize=7, loc="best")
    windowed = f" (mean per {widest} cycles, min–max shaded)" if widest > 1 else ""
    fig.suptitle(f"Per-cycle metrics — {data.title}{windowed}", fontsize=12)
    return _png(fig)


def _heatmap(
    fig: Figure,
    cells: Sequence[Sequence[float | None]],
    rows: Sequence[str],
    columns: Sequence[str],
    *,
    vmin: float,
    vmax: float,
    digits: int,
    label: str,
) -> None:
    ax = fig.subplots()
    grid = [[math.nan if v is None else float(v) for v in row] for row in cells]
    image = ax.imshow(grid, vmin=vmin, vmax=vmax, cmap="viridis", aspect="auto")
    fig.colorbar(image, ax=ax, label=label)
    xs, ys = _ticks(len(columns)), _ticks(len(rows))
    ax.set_xticks(xs, labels=[columns[i] for i in xs], rotation=45, ha="right", fontsize=8)
    ax.set_yticks(ys, labels=[rows[i] for i in ys], fontsize=8)
    if len(rows) * len(columns) <= 400:
        for i, row in enumerate(grid):
            for j, value in enumerate(row):
                if not math.isnan(value):
                    shade = "black" if value > vmin + 0.6 * (vmax - vmin) else "white"
                    text = str(int(value)) if value.is_integer() else f"{value:.{digits}f}"
                    ax.text(j, i, text, ha="center", va="center", color=shade, fontsize=7)


LABELLED_TICKS = 40
"""The most rows or columns of a heatmap that get a label of their own; a larger one gets
about 10, evenly spaced (thousands of labels are unreadable and took a minute to lay out)."""


def _ticks(count: int) -> list[int]:
    if count <= LABELLED_TICKS:
        return list(range(count))
    step = math.ceil(count / 10)
    return list(range(0, count, step))


def plot_similarity(run_id: str, similarity: PairwiseSimilarity, of_cycles: int = 0) -> bytes:
    """Heatmap of the pairwise cosine similarity of a run's reflections.

    `of_cycles`: how many cycles the reflections shown were evenly sampled from (0: they
    are all of them); the title says so.
    """
    n = len(similarity.labels)
    size = min(12.0, 3.0 + 0.45 * n)
    fig = Figure(figsize=(size + 1.5, size))
    labels = [str(c) for c in similarity.labels]
    _heatmap(
        fig,
        similarity.matrix,
        labels,
        labels,
        vmin=0.0,
        vmax=1.0,
        digits=2,
        label="cosine similarity",
    )
    ax = fig.axes[0]
    ax.set_xlabel("cycle")
    ax.set_ylabel("cycle")
    sampled = f", {n} of {of_cycles} cycles evenly spaced" if of_cycles > n else ""
    ax.set_title(f"Reflection similarity — {run_id} ({similarity.method}{sampled})", fontsize=10)
    return _png(fig)


def plot_pei(matrix: PeiMatrix, *, by_model: bool = False) -> bytes:
    """Heatmap of PEI levels, histories (runs, or the models that lived them) x evaluators."""
    fig = Figure(figsize=(3.0 + 1.2 * len(matrix.columns), 2.0 + 0.45 * len(matrix.rows)))
    _heatmap(
        fig,
        matrix.cells,
        matrix.rows,
        matrix.columns,
        vmin=1.0,
        vmax=10.0,
        digits=1,
        label="PEI level",
    )
    ax = fig.axes[0]
    for row, label in enumerate(matrix.rows):
        for column, evaluator in enumerate(matrix.columns):
            if evaluator == label:  # a self-rating: on the diagonal, outlined
                ax.add_patch(
                    Rectangle((column - 0.5, row - 0.5), 1, 1, fill=False, edgecolor="red", lw=1.5)
                )
            stale = matrix.stale_at(row, column)
            if stale is not None:
                ax.text(
                    column,
                    row,
                    f"({stale.level}) stale*",
                    ha="center",
                    va="center",
                    color="grey",
                    fontsize=7,
                )
    ax.set_xlabel("evaluator")
    if by_model:
        ax.set_ylabel("history model (mean over replicates)")
        ax.set_title("PEI: history model × evaluator model", fontsize=10)
    else:
        ax.set_ylabel("history (run)")
        ax.set_title("PEI ratings per run", fontsize=10)
    return _png(fig)


def plot_self_cross(figures: Sequence[SelfCross]) -> bytes:
    """Self − cross per model: each history's difference as a dot, their mean as a bar."""
    shown = [f for f in figures if f.differences]
    fig = Figure(figsize=(3.0 + 1.0 * len(shown), 3.5), layout="constrained")
    ax = fig.subplots()
    ax.axhline(0, color="grey", lw=1)
    for i, f in enumerate(shown):
        ax.bar(i, f.difference or 0.0, width=0.5, color=f"C{i % 10}", alpha=0.4)
        ax.scatter([i] * len(f.differences), f.differences, color=f"C{i % 10}", s=18, zorder=3)
    ax.set_xticks(
        range(len(shown)),
        labels=[f"{f.model}\nn={f.histories}, p={f.p_value:.2g}" for f in shown],
        fontsize=8,
    )
    ax.set_ylabel("self − cross (PEI levels)")
    ax.set_title("PEI: own histories, self-rating − others' rating", fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    return _png(fig)
