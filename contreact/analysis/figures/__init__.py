"""The figures of a study, drawn alike for `contreact report` and for a notebook.

`per_model` (each model's mean per cycle with its 95 % interval), `per_run` (every run),
`pei_heatmap`, `similarity_heatmap` and `self_cross` take plain rows or the DataFrames of
`contreact.load`, and return a matplotlib `Figure` in the shared style (`style`): one or
two columns wide, 8 pt text, a model's colour the same everywhere. `save(fig, stem)`
writes it as PDF, SVG and a 300 dpi PNG.
"""

from contreact.analysis.figures.heatmaps import pei_heatmap, similarity_heatmap
from contreact.analysis.figures.pei import self_cross
from contreact.analysis.figures.style import ONE_COLUMN, TWO_COLUMN, palette, render, save
from contreact.analysis.figures.trajectories import PLOTTED, per_model, per_run

__all__ = [
    "ONE_COLUMN",
    "PLOTTED",
    "TWO_COLUMN",
    "palette",
    "pei_heatmap",
    "per_model",
    "per_run",
    "render",
    "save",
    "self_cross",
    "similarity_heatmap",
]
