"""One look for every figure contreact draws, in the report and in a notebook.

A journal takes a figure at one column (3.5 in) or two columns (7 in) wide, with text no
smaller than 8 pt at that size, as vector graphics (PDF, SVG) or a 300 dpi bitmap. A
reader comparing figures expects a model to keep its colour everywhere: in every panel,
every figure and every batch. This module holds those rules: the sizes, the fonts (set
through matplotlib's rc parameters, for the figures drawn inside `styled`), the
colour-blind-safe palette (Okabe & Ito 2008) assigned to models in one order, the line
styles that tell batches apart, and the writer of the three formats.

Figures are made with matplotlib's object API (`Figure`, no pyplot state), so drawing
one never touches a notebook's own figures.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal, cast

import matplotlib
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

ONE_COLUMN = 3.5
"""A one-column figure's width, inches."""
TWO_COLUMN = 7.0
"""A two-column figure's width, inches."""
FONT_SIZE = 8.0
"""Every text of a figure, points (the smallest most journals accept at print size)."""
DPI = 300
"""The PNG's resolution at print size."""
FORMATS = ("pdf", "svg", "png")
"""Each figure is written in all three."""

OKABE_ITO = (
    "#0072B2",  # blue
    "#D55E00",  # vermillion
    "#009E73",  # bluish green
    "#CC79A7",  # reddish purple
    "#E69F00",  # orange
    "#56B4E9",  # sky blue
    "#000000",  # black
    "#F0E442",  # yellow (last: faint on white)
)
"""Colours told apart with every common colour-vision deficiency (Okabe & Ito 2008)."""

MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
"""Past eight models the colours repeat, with the next marker."""
LineStyle = Literal["-", "--", ":", "-."]
BATCH_STYLES: tuple[LineStyle, ...] = ("-", "--", ":", "-.")
"""Line styles of the batches of a figure, in their order (a model keeps its colour)."""

RC: dict[str, Any] = {
    "font.size": FONT_SIZE,
    "axes.titlesize": FONT_SIZE,
    "axes.labelsize": FONT_SIZE,
    "xtick.labelsize": FONT_SIZE,
    "ytick.labelsize": FONT_SIZE,
    "legend.fontsize": FONT_SIZE,
    "legend.title_fontsize": FONT_SIZE,
    "figure.titlesize": FONT_SIZE + 1,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "grid.linewidth": 0.5,
    "lines.linewidth": 1.2,
    "lines.markersize": 3.0,
    "legend.frameon": False,
    "pdf.fonttype": 42,  # TrueType in the PDF: text stays text, as journals ask
    "svg.fonttype": "none",
    "savefig.dpi": DPI,
}
"""matplotlib settings of every figure drawn inside `styled`."""


@contextmanager
def styled() -> Iterator[None]:
    """Draw (and save) figures in the shared style; matplotlib's own settings come back."""
    with matplotlib.rc_context(cast(Any, RC)):
        yield


def figure(width: float, height: float) -> Figure:
    """A blank figure of `width` x `height` inches, laid out so nothing is cut off."""
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def palette(models: Iterable[str]) -> dict[str, tuple[str, str]]:
    """Each model's colour and marker, in the order given (the first model is blue)."""
    order = list(dict.fromkeys(models))
    return {
        model: (OKABE_ITO[i % len(OKABE_ITO)], MARKERS[(i // len(OKABE_ITO)) % len(MARKERS)])
        for i, model in enumerate(order)
    }


def batch_styles(batches: Iterable[str | None]) -> dict[str | None, LineStyle]:
    """Each batch's line style, in the order given."""
    order = list(dict.fromkeys(batches))
    return {b: BATCH_STYLES[i % len(BATCH_STYLES)] for i, b in enumerate(order)}


def render(fig: Figure) -> dict[str, bytes]:
    """The figure in every format of `FORMATS`, at its own size (PNG at `DPI`)."""
    found = {}
    with styled():
        # Laid out at the PNG's resolution (a second pass settles what the first moved,
        # a colorbar's label), then kept: the three files share that layout.
        fig.set_dpi(DPI)
        fig.canvas.draw()
        fig.canvas.draw()
        fig.set_layout_engine("none")
        for fmt in FORMATS:
            buffer = io.BytesIO()
            # Metadata left out: the same figure gives the same bytes on every run.
            metadata: Mapping[str, Any] = (
                {"Creator": None, "Producer": None, "CreationDate": None}
                if fmt == "pdf"
                else {"Date": None}
                if fmt == "svg"
                else {"Software": None}
            )
            fig.savefig(buffer, format=fmt, dpi=DPI, metadata=dict(metadata))
            found[fmt] = buffer.getvalue()
    return found


def save(fig: Figure, stem: Path | str) -> list[Path]:
    """Write `stem.pdf`, `stem.svg` and `stem.png` (created folder); returns the paths."""
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    written = []
    for fmt, data in render(fig).items():
        path = stem.with_name(f"{stem.name}.{fmt}")
        path.write_bytes(data)
        written.append(path)
    return written


def finish(fig: Figure) -> Figure:
    """`fig` with its tick labels fixed at `FONT_SIZE`.

    matplotlib makes tick labels when it draws, from the settings of that moment: fixed
    here, a figure drawn or saved outside `styled` (`fig.savefig` in a notebook) keeps them.
    """
    for ax in fig.axes:
        ax.tick_params(labelsize=FONT_SIZE)
    return fig


def legend_below(fig: Figure, handles: Sequence[Any], labels: Sequence[str]) -> None:
    """The figure's legend under its panels, outside every axes (never over the data)."""
    if not handles:
        return
    # One row when the entries fit across (about 0.065 in a character at 8 pt, plus the
    # handle), else as few columns as read well.
    needed = sum(0.065 * len(label) + 0.7 for label in labels)
    if needed <= fig.get_figwidth() - 0.2:
        columns = len(labels)
    else:
        columns = 3 if fig.get_figwidth() > ONE_COLUMN + 0.1 else 1
    # matplotlib fills a legend column by column; this order reads row by row instead.
    rows = -(-len(labels) // columns)
    order = [r * columns + c for c in range(columns) for r in range(rows)]
    order = [i for i in order if i < len(labels)]
    fig.legend(
        [handles[i] for i in order],
        [labels[i] for i in order],
        loc="outside lower center",
        ncols=columns,
    )
