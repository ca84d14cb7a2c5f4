"""`contreact report`: tables, figures and one self-contained HTML page for runs or a batch.

A researcher wants the numbers in four forms: CSV to compute with, LaTeX (booktabs) to put
in a paper, Markdown to paste into notes, and a single HTML file to look at and send
around; and the figures as PDF and SVG for a paper, PNG for a screen. The HTML embeds its
images as data URIs and carries its CSS inline, with no script, so it opens the same
offline, from an e-mail, or years later, and prints. Everything is computed from the
stored cycles, events and PEI ratings; nothing is sent to a model, except that a run
configured with an embedding model has its reflection-similarity heatmap embedded the
same way the monitor did (falling back to TF-IDF, and saying so, when it is unreachable).
Every model-level number carries a 95 % interval (`analysis.intervals`), and batches and
models are compared with their differences, permutation tests and effect sizes
(`analysis.comparisons`).

One stage per module: `collect` reads the runs, `table1`, `tables`, `statistics` and
`plots` format them, `render` writes Markdown and HTML, `files` writes every file.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from contreact.analysis.report.collect import ReportData, RunData, collect
from contreact.analysis.report.files import ReportFiles, write_report
from contreact.analysis.report.tables import markdown_table
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
