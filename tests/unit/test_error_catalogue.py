"""docs/errors.md is the catalogue of every one-line error, and no line names an exception class.

The catalogue is collected from the code that writes each line (`support.error_catalogue`)
and compared with the page, so a new, changed or removed error line fails this test until
the page is regenerated (`CONTREACT_WRITE_ERRORS_DOC=1`). The end-to-end check that real
error paths print lines of this catalogue is `tests/e2e/test_error_lines_e2e.py`.
"""

from __future__ import annotations

import os
import re

from support.error_catalogue import DOC, collect, read_doc, render, template

CLASS_NAME = re.compile(r"\b[A-Z][A-Za-z]*(Error|Exception|Exit|Interrupt)\b")
"""A literal exception class name (`ValidationError`, `OperationalError`, `RecursionError`)."""

SHOWS_A_CLASS = re.compile(r"__name__|__class__|type\(|\{(exc|error|e)!r\}")
"""An inserted value that prints a class: `type(exc).__name__`, `{exc!r}`."""


def test_the_catalogue_page_is_the_code() -> None:
    wanted = render(collect())
    if os.environ.get("CONTREACT_WRITE_ERRORS_DOC"):
        DOC.write_text(wanted, encoding="utf-8")
    assert read_doc() == wanted, (
        "docs/errors.md differs from the error lines in the code; regenerate it with "
        "CONTREACT_WRITE_ERRORS_DOC=1 pytest tests/unit/test_error_catalogue.py"
    )


def test_the_catalogue_holds_each_kind_of_line() -> None:
    lines = [s.template for s in collect()]
    assert len(lines) >= 60
    for known in (
        "no run named {run} in",  # explain
        "unexpected error: {detail(exc)} (rerun with --debug for the traceback)",  # fallback
        "cannot reach Ollama at {host}",  # a model call
        "did not finish answering within {timeout_s} s",  # the deadline
        "database {where} cannot be reached",  # PostgreSQL down
        "database {where} is locked by another process",  # SQLite
        "unknown key `{name}`{hint}",  # a config problem
        "interrupted",
    ):
        assert any(known in line for line in lines), known


def test_no_line_names_an_exception_class() -> None:
    for site in collect():
        literal = re.sub(r"\{[^}]*\}", "", site.template)
        assert not CLASS_NAME.search(literal), site
        assert not SHOWS_A_CLASS.search(site.template), site


def test_the_checks_catch_what_they_look_for() -> None:
    import ast

    shown = template(ast.parse('f"failed: {type(exc).__name__}: {exc}"', mode="eval").body)
    assert shown == "failed: {type(exc).__name__}: {exc}" and SHOWS_A_CLASS.search(shown)
    assert CLASS_NAME.search("cannot be read (ValidationError: 1 validation error)")
    assert not CLASS_NAME.search("an error, an exception, the Errors page")
