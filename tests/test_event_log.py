"""The JSONL mirror of the event log: appended after commits, repaired from the database."""

from __future__ import annotations

import json
from pathlib import Path

from checkpoints.db import engine_for, resolve_storage
from checkpoints.events import Event, log_path, read_events, sync_log
from checkpoints.journal import Ledger


def test_sync_appends_a_missing_tail_and_rewrites_a_damaged_file(tmp_path: Path) -> None:
    storage = resolve_storage(tmp_path)
    engine = engine_for(storage)
    ledger = Ledger(storage, "r", engine)
    ledger.emit(*(Event("CYCLE_START", c, f"c{c}:start", {"n": c}) for c in (1, 2, 3)))
    path = log_path(storage, "r")
    full = path.read_text(encoding="utf-8")
    assert [json.loads(x)["payload"]["n"] for x in full.splitlines()] == [1, 2, 3]
    assert [e["payload"]["n"] for e in read_events(engine, "r")] == [1, 2, 3]

    # A crash between a commit and its append leaves the file one line short.
    path.write_text("".join(full.splitlines(keepends=True)[:2]), encoding="utf-8")
    sync_log(engine, storage, "r")
    assert path.read_text(encoding="utf-8") == full

    # Emitting the same events again (a re-run node) writes nothing twice.
    ledger.emit(Event("CYCLE_START", 3, "c3:start", {"n": 3}))
    assert path.read_text(encoding="utf-8") == full

    # A damaged or foreign file is rewritten from the database.
    path.write_text('{"not": "ours"}\n', encoding="utf-8")
    sync_log(engine, storage, "r")
    assert path.read_text(encoding="utf-8") == full
    path.unlink()
    sync_log(engine, storage, "r")
    assert path.read_text(encoding="utf-8") == full
