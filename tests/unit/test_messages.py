"""Inputs echoed in error lines are cut; an exception is told by its words, not its class."""

from __future__ import annotations

from contreact.errors import detail
from contreact.text.messages import cut


def test_a_long_input_keeps_its_ends_and_says_its_length() -> None:
    shown = cut("a" * 4000 + "THE-END", 80)
    assert shown.startswith("a" * 50) and "THE-END" in shown and "(4,007 characters)" in shown
    assert len(shown) < 110
    assert cut("short") == "short" and cut("x" * 80) == "x" * 80


def test_an_exception_is_told_by_its_first_line_without_its_class() -> None:
    assert detail(ValueError("\n  first line\nsecond")) == "first line"
    assert detail(RecursionError()) == "no detail"
    assert "ValueError" not in detail(ValueError("bad value"))
    assert len(detail(ValueError("z" * 5000))) < 400
