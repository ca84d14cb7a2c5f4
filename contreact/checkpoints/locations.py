"""Where contreact's data lives by default: one definition, importable without SQLAlchemy.

`checkpoints.storage` resolves storage from it, and `checkpoints.peek` (the standard-library
fast path of `list` and `status`) finds the SQLite file through it.
"""

from __future__ import annotations

import os
from pathlib import Path

DB_FILENAME = "contreact.db"
"""The SQLite file inside the data directory."""


def default_data_dir() -> Path:
    """`CONTREACT_HOME` if set, else `./runs`."""
    return Path(os.environ.get("CONTREACT_HOME") or "runs")
