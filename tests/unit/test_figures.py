"""Figures a journal takes, in the shared style of the report and the notebook.

Their sizes, 8 pt text, nothing cut off, legends off the data, a model's one colour
everywhere, and PDF, SVG and a 300 dpi PNG of each.
"""

from __future__ import annotations

import io
from typing import Any

import pytest
from matplotlib.colors import to_hex
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.text import Text
from PIL import Image

from contreact.analysis.figures import (
    ONE_COLUMN,
    TWO_COLUMN,
    pei_heatmap,
    per_model,
    per_run,
    render,
    self_cross,
    similarity_heatmap,
)
from contreact.analysis.figures.style import DPI, OKABE_ITO, palette
from contreact.analysis.intervals import mean_interval
from contreact.analysis.pei.self_rating import SelfCross


def cycles(batch: str, models: list[str], shift: float = 0.0) -> list[dict[str, Any]]:
    rows = []
    for m, model in enumerate(models):
        for r in range(1, 4):
            for c in range(1, 6):
                rows.append(
                    {
                        "run_id": f"{batch}.{model}.r{r}",
                        "batch": batch,
                        "model": model,
                        "cycle": c,
                        "memory_ops_total": 3 + (c == 3),
                        "messages_to_operator": int(c == 2),
                        "final_memory_keys": c,
                        "reflection_chars": 200 + 10 * m + 7 * r + c + shift,
                        "response_chars": 300 + 5 * r * c + shift,
                        "memory_write_chars": 40 + r,
                        "tokens_out": 100 + c * r,
                        "similarity": None if c == 1 else 0.2 + 0.1 * r,
                    }
                )
    return rows


def differences(model: str, values: tuple[float, ...]) -> SelfCross:
    return SelfCross(
        model, len(values), 5.0, 4.0, sum(values) / len(values), 0.5, True, values,
        mean_interval(list(values)),
    )  # fmt: skip


FIGURES = {
    "per_model": lambda: per_model(cycles("a", ["m1", "m2"]) + cycles("b", ["m1", "m2"], 9)),
    "per_run": lambda: per_run(cycles("a", ["m1", "m2", "m3"])),
    "pei": lambda: pei_heatmap(
        [[5, 7, None], [3, 2, 9]],
        ["a.m1.r1", "a.m2.r1"],
        ["m1", "m2", "judge"],
        self_cells=[(0, 0), (1, 1)],
        stale={(0, 2): "(4)"},
    ),
    "similarity": lambda: similarity_heatmap(
        [1, 2, 3], [[1, 0.3, 0.2], [0.3, 1, 0.6], [0.2, 0.6, 1]], note="lexical"
    ),
    "self_cross": lambda: self_cross(
        [differences("m1", (1.0, 2.0, -1.0)), differences("m2", (0.0, -2.0, -1.0))]
    ),
}


def texts(fig: Figure) -> list[Text]:
    return [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]


@pytest.mark.parametrize("name", list(FIGURES))
def test_a_figure_fits_a_column_with_8pt_text_and_nothing_cut_off(name: str) -> None:
    fig = FIGURES[name]()
    assert fig.get_figwidth() in (ONE_COLUMN, TWO_COLUMN)
    formats = render(fig)
    fig.set_dpi(DPI)  # laid out again as the PNG is, then measured
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    for text in texts(fig):
        assert text.get_fontsize() >= 8, (text.get_text(), text.get_fontsize())
    # Everything drawn (ticks, labels, titles, legends, outlines) lies within the page.
    drawn = fig.get_tightbbox(renderer)  # inches
    width, height = fig.get_size_inches()
    tolerance = 0.01  # inches
    assert drawn.x0 >= -tolerance and drawn.y0 >= -tolerance, f"{name}: cut off left/bottom"
    assert drawn.x1 <= width + tolerance and drawn.y1 <= height + tolerance, f"{name}: cut off"
    for legend in fig.legends:
        box = legend.get_window_extent(renderer)
        for ax in fig.axes:
            assert not box.overlaps(ax.get_window_extent(renderer)), f"{name}: legend on data"
    assert formats["pdf"].startswith(b"%PDF") and b"<svg" in formats["svg"][:500]
    with Image.open(io.BytesIO(formats["png"])) as png:
        assert png.width == round(fig.get_figwidth() * DPI)
        assert png.info["dpi"] == pytest.approx((DPI, DPI), abs=1)


def line_colours(fig: Figure) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for ax in fig.axes:
        for line in ax.get_lines():
            label = str(line.get_label())
            if not label.startswith("_"):
                found.setdefault(label, set()).add(to_hex(line.get_color()))
    return found


def test_a_model_keeps_one_colour_in_every_figure_and_batch() -> None:
    models = ["m1", "m2"]
    expected = {m: colour for m, (colour, _) in palette(models).items()}
    assert [to_hex(c) for c in expected.values()] == [to_hex(c) for c in OKABE_ITO[:2]]
    expected = {m: to_hex(c) for m, c in expected.items()}
    both = per_model(cycles("a", models) + cycles("b", models, 9), models=models)
    by_colour: dict[str, set[str]] = {}
    for ax in both.axes[:8]:
        for line in ax.get_lines():
            by_colour.setdefault(to_hex(line.get_color()), set()).add(str(line.get_linestyle()))
    # Two models, two batches: two colours, each drawn solid (batch a) and dashed (batch b).
    assert set(by_colour) == set(expected.values())
    assert all(styles == {"-", "--"} for styles in by_colour.values())
    runs = per_run(cycles("a", models), models=models)
    drawn = {to_hex(line.get_color()) for ax in runs.axes for line in ax.get_lines()}
    assert drawn == set(expected.values())
    # Another order of appearance does not change a model's colour when the order is given.
    swapped = per_model(cycles("a", ["m2", "m1"]), models=models)
    first_line = swapped.axes[0].get_lines()[0]
    assert to_hex(first_line.get_color()) == expected["m2"]


def test_every_panel_starts_at_cycle_one_and_has_a_band() -> None:
    fig = per_model(cycles("a", ["m1"]))
    lefts = {round(ax.get_xlim()[0], 6) for ax in fig.axes if ax.get_visible()}
    assert lefts == {0.5}  # similarity included, though it has no value at cycle 1
    assert all(ax.collections for ax in fig.axes if ax.get_visible())  # the 95 % band


def test_self_ratings_are_outlined_inside_their_cells_and_explained() -> None:
    fig = pei_heatmap([[5, 7], [3, 2]], ["m1", "m2"], ["m1", "m2"], self_cells=[(0, 0), (1, 1)])
    ax = fig.axes[0]
    outlines = [p for p in ax.patches if isinstance(p, Rectangle) and not p.get_fill()]
    assert sorted((p.get_x() + 0.45, p.get_y() + 0.45) for p in outlines) == [(0, 0), (1, 1)]
    x0, x1 = sorted(ax.get_xlim())
    assert all(x0 <= p.get_x() and p.get_x() + p.get_width() <= x1 for p in outlines)
    (legend,) = fig.legends
    assert "self-rating" in legend.get_texts()[0].get_text()
    numbers = {t.get_text() for t in ax.texts}
    assert {"5", "7", "3", "2"} <= numbers
