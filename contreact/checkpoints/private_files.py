"""Data files readable by their owner only: the data directory 0700, its files 0600.

A run's database, JSONL log and batch output hold everything a model and an operator
wrote, and the storage URL's password may sit in a run's config. On a shared machine
the default umask (022) would make all of it world-readable, so every directory and
file contreact creates for its data is created private, whatever the umask. Modes are
set at creation (no window in which the file is readable by others); existing files
and folders the user made keep the modes the user chose.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TextIO, cast

DIR_MODE = 0o700
FILE_MODE = 0o600


def private_dir(path: Path) -> Path:
    """`mkdir -p path`, every directory it creates owner-only; returns `path`."""
    missing: list[Path] = []
    here = path
    while not here.exists() and here != here.parent:
        missing.append(here)
        here = here.parent
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=DIR_MODE)
        except FileExistsError:  # another process made it meanwhile
            continue
    return path


def touch_private(path: Path) -> Path:
    """Create `path` empty and owner-only unless it exists (its folder made private too).

    SQLite gives its `-wal` and `-shm` files the database file's mode, so creating the
    database file first makes all three private.
    """
    private_dir(path.parent)
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT, FILE_MODE))
    return path


def open_private(path: Path, mode: str = "a") -> TextIO:
    """Open `path` for text writing (`"a"` append or `"w"` truncate), created owner-only."""
    if mode not in ("a", "w"):
        raise ValueError(f"open_private: mode must be 'a' or 'w', not {mode!r}")
    private_dir(path.parent)
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if mode == "a" else os.O_TRUNC)
    return cast(TextIO, os.fdopen(os.open(path, flags, FILE_MODE), mode, encoding="utf-8"))
