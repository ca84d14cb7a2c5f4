"""Per-cycle metrics as small multiples: each model's mean with its interval, or each run.

The figure a paper shows is the per-model one: one panel per metric, one line per model
(and batch) with its 95 % band, a bootstrap over the runs at each cycle (`intervals`).
The per-run figure draws every run, for a reader who wants to see the replicates
themselves. Both share the x-axis from cycle 1 (the similarity panel has nothing at cycle
1, and still starts there), and a run longer than `POINTS_PER_PANEL` cycles is drawn per
window of consecutive cycles (its mean), which the caption says.

Rows are per-cycle rows as `contreact.load(...).cycles` and `report` hold them: `run_id`,
`model`, `batch`, `cycle` and the metrics; a DataFrame is taken as it is.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from contreact.analysis.figures.style import (
    TWO_COLUMN,
    LineStyle,
    batch_styles,
    figure,
    finish,
    legend_below,
    palette,
    styled,
)
from contreact.analysis.intervals import SEED, mean_bands
from contreact.analysis.records import records
from contreact.analysis.runs import replicate_of, run_order

PLOTTED: tuple[tuple[str, str], ...] = (
    ("memory_ops_total", "Memory tool ops"),
    ("messages_to_operator", "Messages to operator"),
    ("final_memory_keys", "Memory keys (end of cycle)"),
    ("reflection_chars", "Reflection chars"),
    ("response_chars", "Response chars"),
    ("memory_write_chars", "Memory written chars"),
    ("tokens_out", "Tokens out"),
    ("similarity", "Similarity to past notes"),
)
"""Per-cycle metrics, one panel each, in this order."""

POINTS_PER_PANEL = 300
"""The most points a line has in a panel: a longer run is drawn per window of cycles."""

Group = tuple[str | None, str]
"""(batch, model)"""


def window_size(last_cycle: int, most: int = POINTS_PER_PANEL) -> int:
    """Cycles per window so that a run of `last_cycle` cycles has at most `most` points."""
    return max(1, math.ceil(last_cycle / most))


def _series(
    rows: Sequence[dict[str, Any]], key: str, size: int, windows: int
) -> dict[str, list[float]]:
    """Each run's per-window mean of `key` (NaN where the run has no value)."""
    sums: dict[str, list[float]] = {}
    counts: dict[str, list[int]] = {}
    for row in rows:
        run = str(row["run_id"])
        value = row.get(key)
        sums.setdefault(run, [0.0] * windows)
        counts.setdefault(run, [0] * windows)
        if value is None or (isinstance(value, float) and math.isnan(value)):
            continue
        w = (int(row["cycle"]) - 1) // size
        sums[run][w] += float(value)
        counts[run][w] += 1
    return {
        run: [s / c if c else math.nan for s, c in zip(sums[run], counts[run], strict=True)]
        for run in sums
    }


def _layout(
    rows: Sequence[dict[str, Any]], models: Sequence[str] | None
) -> tuple[
    dict[Group, list[dict[str, Any]]],
    dict[str, tuple[str, str]],
    dict[str | None, LineStyle],
    int,
    list[float],
]:
    groups: dict[Group, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row.get("batch"), str(row["model"])), []).append(row)
    colours = palette([*(models or []), *(model for _, model in groups)])
    styles = batch_styles(batch for batch, _ in groups)
    last = max((int(row["cycle"]) for row in rows), default=1)
    size = window_size(last)
    windows = math.ceil(last / size)
    xs = [min(last, w * size + (size + 1) / 2) if size > 1 else w + 1.0 for w in range(windows)]
    return groups, colours, styles, size, xs


DODGE = 0.25
"""The width, in cycles, over which the groups' points at one cycle are spread."""


def _dodged(xs: Sequence[float], group: int, groups: int) -> list[float]:
    """`xs` shifted a little per group, so models with equal values stay visible."""
    if groups < 2 or len(xs) > 30:
        return list(xs)
    offset = DODGE * (group / (groups - 1) - 0.5)
    return [x + offset for x in xs]


def _panels(fig: Figure, metrics: Sequence[tuple[str, str]], last: float) -> list[Any]:
    columns = 4 if len(metrics) > 3 else len(metrics)
    grid = fig.subplots(math.ceil(len(metrics) / columns), columns, sharex=True, squeeze=False)
    axes = list(grid.flatten())
    for ax in axes[len(metrics) :]:
        ax.set_visible(False)
    for ax, (key, label) in zip(axes, metrics, strict=False):
        ax.set_title(label)
        ax.set_xlim(0.5, max(last, 1) + 0.5)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=5))
        ax.yaxis.set_major_locator(MaxNLocator(integer=key != "similarity", nbins=5))
    for ax in grid[-1]:
        ax.set_xlabel("cycle")
    return axes


def _legend(
    fig: Figure,
    groups: Sequence[Group],
    colours: dict[str, tuple[str, str]],
    styles: dict[str | None, LineStyle],
    extra: Sequence[tuple[Any, str]] = (),
) -> None:
    handles: list[Any] = []
    labels: list[str] = []
    for model in dict.fromkeys(model for _, model in groups):
        colour, marker = colours[model]
        handles.append(Line2D([], [], color=colour, marker=marker))
        labels.append(model)
    if len(styles) > 1:
        for batch, style in styles.items():
            handles.append(Line2D([], [], color="grey", linestyle=style))
            labels.append(f"batch {batch}")
    for handle, label in extra:
        handles.append(handle)
        labels.append(label)
    legend_below(fig, handles, labels)


def per_model(
    cycles: Any,
    *,
    metrics: Sequence[tuple[str, str]] = PLOTTED,
    models: Sequence[str] | None = None,
    width: float = TWO_COLUMN,
    seed: int = SEED,
) -> Figure:
    """Each model's mean per cycle with its 95 % bootstrap band over runs, one panel a metric.

    Args:
        cycles: Per-cycle rows (or `contreact.load(...).cycles`).
        metrics: `(column, title)` of each panel.
        models: The models' order, for their colours (default: order of appearance).
        width: The figure's width in inches (`TWO_COLUMN` or `ONE_COLUMN`).
        seed: The bootstrap's seed.
    """
    rows = records(cycles)
    with styled():
        groups, colours, styles, size, xs = _layout(rows, models)
        panel_rows = math.ceil(len(metrics) / 4)
        fig = figure(width, 1.6 * panel_rows + 0.9)
        axes = _panels(fig, metrics, xs[-1] if xs else 1.0)
        for g, ((batch, model), members) in enumerate(groups.items()):
            colour, marker = colours[model]
            shifted = _dodged(xs, g, len(groups))
            for ax, (key, _) in zip(axes, metrics, strict=False):
                series = _series(members, key, size, len(xs))
                data = np.asarray(list(series.values()), dtype=np.float64)
                mean, low, high = mean_bands(data, seed=seed)
                ax.plot(
                    shifted,
                    mean,
                    color=colour,
                    linestyle=styles[batch],
                    marker=marker if len(xs) <= 30 else None,
                )
                ax.fill_between(shifted, low, high, color=colour, alpha=0.18, linewidth=0)
        band = (
            Line2D([], [], color="grey", alpha=0.35, linewidth=6),
            "95 % bootstrap interval over runs",
        )
        _legend(fig, list(groups), colours, styles, [band])
        if size > 1:
            fig.suptitle(f"Mean per window of {size} cycles")
    return finish(fig)


def per_run(
    cycles: Any,
    *,
    metrics: Sequence[tuple[str, str]] = PLOTTED,
    models: Sequence[str] | None = None,
    width: float = TWO_COLUMN,
) -> Figure:
    """Every run as its own line (colour: model; shade: replicate), one panel a metric."""
    rows = records(cycles)
    with styled():
        groups, colours, styles, size, xs = _layout(rows, models)
        panel_rows = math.ceil(len(metrics) / 4)
        fig = figure(width, 1.6 * panel_rows + 0.9)
        axes = _panels(fig, metrics, xs[-1] if xs else 1.0)
        for g, ((batch, model), members) in enumerate(groups.items()):
            colour, marker = colours[model]
            shifted = _dodged(xs, g, len(groups))
            for ax, (key, _) in zip(axes, metrics, strict=False):
                series = _series(members, key, size, len(xs))
                ordered = sorted(series, key=run_order)
                for i, run in enumerate(ordered):
                    ax.plot(
                        shifted,
                        series[run],
                        color=colour,
                        linestyle=styles[batch],
                        marker=marker if len(xs) <= 30 else None,
                        alpha=1.0 - 0.5 * i / max(1, len(ordered) - 1),
                        linewidth=0.9,
                        label=f"r{replicate_of(run) or i + 1}",
                    )
        fainter = (Line2D([], [], color="grey", alpha=0.5), "fainter: a later replicate")
        _legend(fig, list(groups), colours, styles, [fainter])
        if size > 1:
            fig.suptitle(f"Mean per window of {size} cycles")
    return finish(fig)
