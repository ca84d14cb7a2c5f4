"""The JSONL mirror of the event log: appended after commits, repaired from the database."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from contreact.checkpoints.engines import engine_for
from contreact.checkpoints.event_mirror import log_path, sync_log
from contreact.checkpoints.event_schema import PAYLOADS, CycleStart, Event
from contreact.checkpoints.event_store import as_line, line_text, read_events
from contreact.checkpoints.journal import Ledger
from contreact.checkpoints.keys import cycle_start
from contreact.checkpoints.storage import resolve_storage
from support.backends import Backend
from support.paths import ROOT

EVENT_DOC = ROOT / "docs" / "event-log.md"


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


def test_sync_reads_the_tail_not_the_whole_log(tmp_path: Path) -> None:
    """A resume at cycle 10,000 syncs the mirror as fast as one at cycle 10."""
    from sqlalchemy import event

    storage = resolve_storage(tmp_path)
    engine = engine_for(storage)
    ledger = Ledger(storage, "r", engine)
    ledger.emit(*(Event(c, cycle_start(c), CycleStart(opening=str(c))) for c in range(1, 40)))
    path = log_path(storage, "r")
    full = path.read_text(encoding="utf-8")
    path.write_text("".join(full.splitlines(keepends=True)[:30]), encoding="utf-8")
    statements: list[str] = []

    def seen(_conn: object, _cursor: object, statement: str, *_args: object) -> None:
        statements.append(statement.lower())

    event.listen(engine, "before_cursor_execute", seen)
    try:
        sync_log(engine, storage, "r")
    finally:
        event.remove(engine, "before_cursor_execute", seen)
    assert path.read_text(encoding="utf-8") == full
    # No statement counts the run's events or skips over them: the last line is found
    # by its cycle, and only the events after it are read.
    assert statements and not [s for s in statements if "count(" in s or "offset" in s]

    # A file cut in the middle of its last line is rewritten from the database.
    path.write_text(full[:-10], encoding="utf-8")
    sync_log(engine, storage, "r")
    assert path.read_text(encoding="utf-8") == full
    path.write_text("", encoding="utf-8")
    sync_log(engine, storage, "r")
    assert path.read_text(encoding="utf-8") == full


def test_the_documented_event_table_is_the_schema() -> None:
    """Every event type is in docs/event-log.md, and every payload key it names exists."""
    rows = re.findall(r"^\| `([A-Z_]+)` \| (.*) \|$", EVENT_DOC.read_text(encoding="utf-8"), re.M)
    documented = {kind: re.findall(r"`([a-z_]+)`", text) for kind, text in rows}
    assert set(documented) == set(PAYLOADS)
    for kind, names in documented.items():
        known = {f.name.rstrip("_") for cls in PAYLOADS[kind] for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        assert set(names) <= known, f"{kind}: the doc names {set(names) - known}"


def test_a_mirror_deleted_during_a_run_is_rebuilt_whole_on_the_next_append(
    tmp_path: Path,
) -> None:
    storage = resolve_storage(tmp_path)
    engine = engine_for(storage)
    ledger = Ledger(storage, "r", engine)
    ledger.emit(Event(1, cycle_start(1), CycleStart(opening="1")))
    log_path(storage, "r").unlink()
    ledger.emit(Event(2, cycle_start(2), CycleStart(opening="2")))
    lines = log_path(storage, "r").read_text(encoding="utf-8").splitlines()
    assert [json.loads(x)["payload"]["opening"] for x in lines] == ["1", "2"]


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(
    payload=st.dictionaries(st.text(), _json, max_size=5),
    run_id=st.text(min_size=1),
    cycle=st.integers(min_value=0, max_value=10**6),
)
def test_an_appended_line_is_the_line_a_rebuild_writes(
    payload: dict[str, object], run_id: str, cycle: int
) -> None:
    """An appended line is the text a rebuild writes, whatever the payload holds.

    The append path splices the stored payload text into the line; a rebuild decodes and
    re-encodes it (NaN, non-ASCII and nesting included).
    """
    row = {
        "timestamp": "2026-11-25T10:00:00.000001Z",
        "cycle": cycle,
        "event_type": "CYCLE_END",
        "payload": json.dumps(payload, ensure_ascii=False, default=str),
    }
    assert line_text(run_id, row) == json.dumps(as_line(run_id, row), ensure_ascii=False)


def test_numbered_run_events_are_counted_without_reading_the_run(backend: Backend) -> None:
    # A resume numbers its PROVENANCE record (and a host change its HOST_CHANGE) by the
    # records before it; counted by type, that read all of a long run's events.
    from contreact.checkpoints.event_schema import HostChange
    from contreact.checkpoints.event_store import numbered
    from contreact.checkpoints.keys import host_change, provenance

    storage = backend.storage()
    engine = engine_for(storage)
    ledger = Ledger(storage, "r", engine)
    calls: list[int] = []

    def counted(n: int) -> str:
        calls.append(n)
        return host_change(n)

    for written in range(0, 41):
        calls.clear()
        assert numbered(engine, "r", counted) == written
        assert len(calls) <= 2 * max(1, written).bit_length() + 1
        change = HostChange(from_="http://a", to="http://b")
        ledger.emit(Event(written, host_change(written), change))
    assert numbered(engine, "r", provenance) == 0
    assert numbered(engine, "other", host_change) == 0


def test_a_count_with_a_limit_stops_there(backend: Backend) -> None:
    # The operator policy counts a run's earlier messages only as far as its list of replies.
    from contreact.checkpoints.event_schema import OperatorMessage
    from contreact.checkpoints.event_store import count_events
    from contreact.checkpoints.keys import operator_message

    storage = backend.storage()
    engine = engine_for(storage)
    ledger = Ledger(storage, "r", engine)
    ledger.emit(*(Event(c, operator_message(c, 0, 0), OperatorMessage()) for c in range(1, 6)))
    ledger.emit(Event(1, cycle_start(1), CycleStart(opening="1")))
    kind = OperatorMessage.event_type
    assert count_events(engine, "r", event_type=kind) == 5
    assert [count_events(engine, "r", event_type=kind, limit=n) for n in (0, 2, 5, 9)] == [
        0,
        2,
        5,
        5,
    ]
    assert count_events(engine, "r", limit=3) == 3
    assert count_events(engine, "other", event_type=kind, limit=3) == 0
