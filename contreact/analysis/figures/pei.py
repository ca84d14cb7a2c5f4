"""PEI self vs cross: how much higher (or lower) a model rates its own histories.

One column per model that lived histories and evaluated: each history's difference
(self-rating minus the other evaluators' mean) as a dot, the mean difference as a marker
with its 95 % bootstrap interval over the histories, and zero as a reference line. The
model keeps its colour from every other figure.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from contreact.analysis.figures.style import (
    ONE_COLUMN,
    TWO_COLUMN,
    figure,
    finish,
    legend_below,
    palette,
    styled,
)
from contreact.analysis.pei.self_rating import SelfCross


def self_cross(figures: Sequence[SelfCross], *, models: Sequence[str] | None = None) -> Figure:
    """Self − cross per model: histories as dots, the mean with its interval."""
    shown = [f for f in figures if f.differences]
    colours = palette([*(models or []), *(f.model for f in shown)])
    width = ONE_COLUMN if len(shown) <= 4 else TWO_COLUMN
    with styled():
        fig = figure(width, 2.9)
        ax = fig.subplots()
        ax.axhline(0, color="grey", linewidth=0.8)
        jitter = np.random.default_rng(0)
        for i, f in enumerate(shown):
            colour, marker = colours[f.model]
            spread = jitter.uniform(-0.12, 0.12, len(f.differences))
            ax.scatter(i + spread, f.differences, color=colour, s=10, alpha=0.5, linewidths=0)
            interval = f.interval
            low = interval.low if interval and interval.low is not None else f.difference
            high = interval.high if interval and interval.high is not None else f.difference
            mean = f.difference or 0.0
            ax.errorbar(
                [i + 0.3],
                [mean],
                yerr=[[mean - (low or mean)], [(high or mean) - mean]],
                color=colour,
                marker=marker,
                markersize=5,
                capsize=3,
            )
        ax.set_xticks(
            range(len(shown)),
            labels=[f"{f.model}\nn={f.histories}, p={f.p_value:.2g}" for f in shown],
        )
        ax.set_xlim(-0.6, max(len(shown), 1) - 0.3)
        ax.set_ylabel("self − cross (PEI levels)")
        ax.grid(axis="x", visible=False)
        legend_below(
            fig,
            [
                Line2D([], [], color="grey", marker="o", linestyle="", alpha=0.5, markersize=3),
                Line2D([], [], color="grey", marker="o", markersize=5),
            ],
            ["one history", "mean, 95 % bootstrap interval"],
        )
    return finish(fig)
