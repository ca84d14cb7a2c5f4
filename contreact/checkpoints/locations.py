"""Where contreact's data lives by default: one definition, importable without SQLAlchemy.

`checkpoints.storage` resolves storage from it, and `checkpoints.peek` (the standard-library
fast path of `list` and `status`) finds the SQLite file through it.

With SQLite the data folder is the record: the database file and the runs' JSONL logs.
With PostgreSQL the database is the record, and a process keeps its local files (the JSONL
logs of the runs it drove, a batch's per-run configs and outputs) in a cache folder of its
own, never in the folder it was started from, unless it is given a data folder.
"""

from __future__ import annotations

import os
from pathlib import Path

DB_FILENAME = "contreact.db"
"""The SQLite file inside the data directory."""


def default_data_dir() -> Path:
    """`CONTREACT_HOME` if set, else `./runs`."""
    return Path(os.environ.get("CONTREACT_HOME") or "runs")


def explicit_data_dir() -> Path | None:
    """`CONTREACT_HOME`, if set: a data folder named in the environment."""
    home = os.environ.get("CONTREACT_HOME")
    return Path(home) if home else None


def cache_home() -> Path:
    """Where contreact keeps local files of a database's runs: `$XDG_CACHE_HOME/contreact`.

    `~/.cache/contreact` when XDG_CACHE_HOME is unset (the XDG base directory default).
    """
    base = os.environ.get("XDG_CACHE_HOME") or ""
    return (Path(base) if base else Path.home() / ".cache") / "contreact"
