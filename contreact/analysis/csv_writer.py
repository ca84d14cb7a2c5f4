"""Every CSV contreact writes, through one writer that a spreadsheet cannot be tricked by.

A model writes reflections, memory keys and values, tool arguments and messages; an
export or a report puts them in CSV cells. A spreadsheet that opens the file treats a
cell starting with `=`, `+`, `-` or `@` as a formula (`=HYPERLINK(...)` phones home,
`=cmd|' /C calc'!A0` runs a program through DDE), and a leading tab or carriage return
can hide one. As OWASP recommends ("CSV Injection"), such a cell is written with a
leading apostrophe, which every spreadsheet shows as text and hides; plain numbers
(`-3`, `+2.5`, `1e-05`) are numbers, not formulas, and stay as they are.

The rule is reversible (`original`): a cell that already starts with apostrophes before
one of those characters gets one more, so removing one apostrophe from every cell that
starts with apostrophes before one of them gives back the text that was written. Terminal
control characters are shown escaped (a CSV is read with `cat` as often as with a
spreadsheet), which is not reversed; parquet and JSON lines keep every value exactly.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Sequence
from typing import Any, TextIO

from contreact.text.terminal import visible

TRIGGERS = "=+-@\t\r"
"""First characters a spreadsheet may read as the start of a formula (OWASP)."""

_GUARDED = re.compile(r"'*[=+\-@\t\r]")
_WRITTEN_GUARDED = re.compile(r"'+[=+\-@\t\r]")
_PLAIN_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def safe_cell(text: str) -> str:
    """`text` as a CSV cell no spreadsheet runs: a formula-like start gets an apostrophe."""
    if _GUARDED.match(text) and not _PLAIN_NUMBER.fullmatch(text):
        return "'" + text
    return text


def original(cell: str) -> str:
    """The text `safe_cell` was given, from the cell it wrote (its exact inverse)."""
    return cell[1:] if _WRITTEN_GUARDED.match(cell) else cell


def cell_text(value: Any) -> str:
    """A value as the text of its CSV cell.

    None is an empty cell; lists and dicts are JSON; text has its terminal control
    characters shown escaped; then every cell passes `safe_cell`, numbers included (a
    number's text is a plain number, so it stays; `-inf` is not, and is guarded).
    """
    if value is None:
        return ""
    if isinstance(value, list | dict):
        text = visible(json.dumps(value, ensure_ascii=False))
    elif isinstance(value, str):
        text = visible(value)
    else:
        text = str(value)
    return safe_cell(text)


def columns_of(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Every key of `rows`, in order of first appearance."""
    return list(dict.fromkeys(key for row in rows for key in row))


def write_csv(
    rows: Sequence[dict[str, Any]], stream: TextIO, columns: Sequence[str] | None = None
) -> int:
    """Write `rows` as CSV with a header line; returns the number of data rows.

    Every cell, the header's too, is written through `cell_text`.
    """
    header = list(columns) if columns is not None else columns_of(rows)
    writer = csv.writer(stream, lineterminator="\n")
    writer.writerow([cell_text(name) for name in header])
    for row in rows:
        writer.writerow([cell_text(row.get(key)) for key in header])
    return len(rows)
