"""The JSONL mirror of the event log: appended after commits, repaired from the database."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

from contreact.checkpoints.db import engine_for, resolve_storage
from contreact.checkpoints.events import (
    PAYLOADS,
    CycleStart,
    Event,
    log_path,
    read_events,
    sync_log,
)
from contreact.checkpoints.journal import Ledger
from contreact.checkpoints.keys import cycle_start

README = Path(__file__).resolve().parent.parent / "README.md"


def test_sync_appends_a_missing_tail_and_rewrites_a_damaged_file(tmp_path: Path) -> None:
    storage = resolve_storage(tmp_path)
    engine = engine_for(storage)
    ledger = Ledger(storage, "r", engine)
    ledger.emit(*(Event(c, cycle_start(c), CycleStart(opening=str(c))) for c in (1, 2, 3)))
    path = log_path(storage, "r")
    full = path.read_text(encoding="utf-8")
    assert [json.loads(x)["payload"]["opening"] for x in full.splitlines()] == ["1", "2", "3"]
    assert [e["payload"]["opening"] for e in read_events(engine, "r")] == ["1", "2", "3"]

    # A crash between a commit and its append leaves the file one line short.
    path.write_text("".join(full.splitlines(keepends=True)[:2]), encoding="utf-8")
    sync_log(engine, storage, "r")
    assert path.read_text(encoding="utf-8") == full

    # Emitting the same events again (a re-run node) writes nothing twice.
    ledger.emit(Event(3, cycle_start(3), CycleStart(opening="3")))
    assert path.read_text(encoding="utf-8") == full

    # A damaged or foreign file is rewritten from the database.
    path.write_text('{"not": "ours"}\n', encoding="utf-8")
    sync_log(engine, storage, "r")
    assert path.read_text(encoding="utf-8") == full
    path.unlink()
    sync_log(engine, storage, "r")
    assert path.read_text(encoding="utf-8") == full


def test_the_readme_event_table_is_the_schema() -> None:
    """Every event type is documented, and every payload key the README names exists."""
    rows = re.findall(r"^\| `([A-Z_]+)` \| (.*) \|$", README.read_text(encoding="utf-8"), re.M)
    documented = {kind: re.findall(r"`([a-z_]+)`", text) for kind, text in rows}
    assert set(documented) == set(PAYLOADS)
    for kind, names in documented.items():
        known = {f.name.rstrip("_") for cls in PAYLOADS[kind] for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        assert set(names) <= known, f"{kind}: README names {set(names) - known}"
