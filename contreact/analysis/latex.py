r"""Tables as LaTeX a paper can `\input`: booktabs rules, escaped cells, notes below.

The report writes its main tables (Table 1 by model, the comparisons, the PEI matrices)
as `.tex` files beside the CSVs. Each is a `table` float with a caption and a label,
ruled with booktabs (`\usepackage{booktabs}` in the preamble; a table of more than
`WIDE` columns is scaled to the line width with graphicx's `\resizebox`), its cells escaped: a
model name such as `qwen3:8b_q4&k` or a note with `%` or `#` compiles as written. The
characters the report uses beyond ASCII (minus, ±, ×, †, middle dot, dashes) become LaTeX
commands that need no package beyond LaTeX itself, so a default pdflatex compiles them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
    "|": r"\textbar{}",
    "−": r"\textminus{}",
    "±": r"\textpm{}",
    "×": r"\texttimes{}",
    "†": r"\textdagger{}",
    "·": r"\textperiodcentered{}",
    "–": "--",
    "—": "---",
    "\u00a0": "~",
}
_PATTERN = re.compile("|".join(re.escape(c) for c in _SPECIAL))
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f]")


def escape(text: object) -> str:
    """`text` as LaTeX that prints it as written (control characters dropped)."""
    plain = _CONTROL.sub("", str(text)).replace("\r", " ").replace("\n", " ")
    return _PATTERN.sub(lambda m: _SPECIAL[m.group()], plain)


def label_of(name: str) -> str:
    r"""A `\label` key from a file name: letters, digits, `-`, `_` and `:` only."""
    return "tab:" + re.sub(r"[^A-Za-z0-9:_-]+", "-", name).strip("-")


WIDE = 6
"""Columns past which a table is scaled to the line width (it would run off the page)."""


def table(
    headers: Sequence[str],
    body: Sequence[Sequence[str]],
    *,
    caption: str,
    label: str,
    notes: Sequence[str] = (),
    first_left: int = 1,
) -> str:
    """A booktabs `table`: the first `first_left` columns left-aligned, the rest right."""
    columns = len(headers)
    align = "l" * min(first_left, columns) + "r" * max(0, columns - first_left)
    wide = columns > WIDE
    packages = "\\usepackage{booktabs}" + (" and \\usepackage{graphicx}" if wide else "")
    lines = [
        f"% Made by contreact report. Needs {packages} in the preamble.",
        "\\begin{table}[htbp]",
        "\\centering",
        f"\\caption{{{escape(caption)}}}",
        f"\\label{{{label}}}",
        *(["\\resizebox{\\linewidth}{!}{%"] if wide else []),
        f"\\begin{{tabular}}{{{align}}}",
        "\\toprule",
        " & ".join(escape(h) for h in headers) + " \\\\",
        "\\midrule",
        *(" & ".join(escape(c) for c in row) + " \\\\" for row in body),
        "\\bottomrule",
        "\\end{tabular}" + ("}" if wide else ""),
    ]
    if notes:
        lines.append("\\par\\smallskip")
        lines.append("{\\footnotesize " + " ".join(escape(note) for note in notes) + "\\par}")
    lines.append("\\end{table}")
    return "\n".join(lines) + "\n"


def standalone(tables: Sequence[str]) -> str:
    """A document holding `tables`, to compile them on their own (`pdflatex`)."""
    return (
        "\\documentclass{article}\n\\usepackage[T1]{fontenc}\n\\usepackage{booktabs}\n"
        "\\usepackage{graphicx}\n"
        "\\usepackage[margin=2cm,landscape]{geometry}\n\\begin{document}\n"
        + "\n".join(tables)
        + "\\end{document}\n"
    )
