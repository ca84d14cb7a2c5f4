"""Rows from either kind of table: a list of mappings (the report) or a pandas DataFrame.

The figures and comparisons are the same functions for `contreact report`, which holds
plain rows, and for a notebook, which holds `contreact.load`'s DataFrames; this is the one
place that tells the two apart, without importing pandas.
"""

from __future__ import annotations

from typing import Any


def records(table: Any) -> list[dict[str, Any]]:
    """Rows from a list of mappings or from a pandas DataFrame (`contreact.load`'s tables).

    A DataFrame's missing values (NaN, NA, NaT) become None, as in the report's rows.
    """
    if hasattr(table, "to_dict"):
        rows = table.astype(object).where(table.notna(), None).to_dict("records")
        return [dict(row) for row in rows]
    return [dict(row) for row in table]
