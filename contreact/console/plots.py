"""A run's per-cycle metrics and similarity as one small figure for the run page.

Drawn as the report draws its figures (matplotlib's object API, no global state, PNG), at
the size of the page's side column. The figure's only words are its fixed titles: no
model text is ever a label, and a PNG carries no markup.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

PANELS: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = (
    (
        "Tool calls and memory ops",
        (("tool_calls", "tool calls"), ("memory_ops_total", "memory ops")),
    ),
    ("Tokens out", (("tokens_out", "tokens out"),)),
    ("Max similarity to earlier reflections", (("similarity", "similarity"),)),
)
"""Each panel's title and its lines: (metric of `analysis.metrics.cycle_table`, legend)."""

COLOURS = ("#2563eb", "#0d9488")

POINTS_PER_PANEL = 300
"""A long run's cycles are drawn as at most this many windows (mean, min-max band)."""


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


def _value(row: dict[str, Any], key: str) -> float:
    value = row.get(key)
    return math.nan if value is None else float(value)


def run_figure(rows: Sequence[dict[str, Any]]) -> bytes:
    """The figure of a run's cycle rows (`analysis.metrics.cycle_table`), as PNG bytes."""
    fig = Figure(figsize=(4.6, 5.0), layout="constrained")
    axes = fig.subplots(len(PANELS), 1, sharex=True)
    cycles = [int(r["cycle"]) for r in rows]
    for ax, (title, lines) in zip(axes, PANELS, strict=True):
        ax.set_title(title, fontsize=9, loc="left", color="#374151")
        ax.tick_params(labelsize=8, colors="#4b5563")
        ax.grid(True, color="#e5e7eb", linewidth=0.6)
        for spine in ("top", "right"):
            ax.spines[spine].set_visible(False)
        for (key, label), colour in zip(lines, COLOURS, strict=False):
            _, xs, means, lows, highs = windows(cycles, [_value(r, key) for r in rows])
            ax.plot(
                xs,
                means,
                color=colour,
                linewidth=1.4,
                marker="." if len(xs) < 40 else "",
                label=label,
            )
            if len(xs) < len(cycles):
                ax.fill_between(xs, lows, highs, color=colour, alpha=0.15, linewidth=0)
        if len(lines) > 1:
            ax.legend(fontsize=7, frameon=False, loc="upper left")
        if lines[0][0] == "similarity":
            ax.set_ylim(0, 1)
    axes[-1].set_xlabel("cycle", fontsize=8, color="#4b5563")
    axes[-1].xaxis.set_major_locator(MaxNLocator(integer=True))
    if not rows:
        axes[0].text(
            0.5, 0.5, "no finished cycle yet", ha="center", va="center", transform=axes[0].transAxes
        )
    FigureCanvasAgg(fig)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    return buffer.getvalue()
