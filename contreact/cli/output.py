"""How commands print results: rich tables for people, full rows for pipes, one JSON document.

On a terminal a table is drawn by rich, fitted to the window. Anywhere else (a pipe, a
file, CI) a table is tab-separated rows under a header row, never cut to a width, so
`contreact list | cut -f1` gives whole run ids. `--json` output is exactly one JSON
document on stdout and nothing else.

Every cell goes through `cell`, the one place that turns a value into printable text.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from contreact.cli.app import out
from contreact.text.terminal import visible


def cell(value: Any) -> str:
    """A value as table text (None as empty), its terminal control characters made visible."""
    return "" if value is None else visible(value)


def _tsv(value: str) -> str:
    # A tab or a line break inside a value would split its row.
    return value.replace("\t", " ").replace("\r", " ").replace("\n", " ")


def emit_json(value: Any) -> None:
    """Print `value` as one JSON document on stdout."""
    sys.stdout.write(json.dumps(value, ensure_ascii=False, indent=2, default=str) + "\n")
    sys.stdout.flush()


def emit_table(columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """A rich table on a terminal; tab-separated full rows with a header elsewhere."""
    texts = [[cell(v) for v in row] for row in rows]
    if out.is_terminal:
        from rich.table import Table
        from rich.text import Text

        table = Table(*columns)
        for row in texts:
            # Text, not str: a value is never read as rich markup.
            table.add_row(*(Text(v) for v in row))
        out.print(table)
        return
    lines = ["\t".join(_tsv(c) for c in columns)]
    lines += ["\t".join(_tsv(v) for v in row) for row in texts]
    sys.stdout.write("\n".join(lines) + "\n")
    sys.stdout.flush()
