"""A value worked out once per test session, however many xdist workers ask for it.

Some tests compare against a reference that is expensive to make and the same for every
test that asks (an uninterrupted run, say). Each worker is its own process, so a fixture's
scope cannot share it; the first worker to ask makes it under a file lock, writes it as
JSON beside the session's temporary folders, and the others read it.
"""

from __future__ import annotations

import fcntl
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest


def session_folder(factory: pytest.TempPathFactory) -> Path:
    """The folder every worker of this session shares (the workers' temp folders' parent)."""
    base = factory.getbasetemp()
    return base.parent if base.name.startswith("popen-gw") else base


def once_per_session(
    factory: pytest.TempPathFactory, name: str, make: Callable[[Path], Any]
) -> Any:
    """`make(folder)`'s JSON value, made by the first worker to ask and read by the rest.

    `folder` is a fresh folder `make` may work in. The value comes back as JSON reads it
    (tuples as lists), whichever worker made it, so callers compare like with like.
    """
    shared = session_folder(factory)
    done = shared / f"{name}.json"
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if not done.exists():
                folder = shared / f"{name}.work"
                folder.mkdir()
                value = make(folder)
                tmp = done.with_suffix(".tmp")
                tmp.write_text(json.dumps(value), encoding="utf-8")
                tmp.replace(done)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return json.loads(done.read_text(encoding="utf-8"))


def as_json(value: Any) -> Any:
    """`value` as it reads back from JSON, to compare with a shared value."""
    return json.loads(json.dumps(value))
