"""A journaled result its step cannot use: named, or (asked to) replaced and recorded as skipped."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from contreact.checkpoints.engines import engine_for
from contreact.checkpoints.event_store import read_events
from contreact.checkpoints.journal import BadRecordError, Ledger, skip_bad_records
from contreact.checkpoints.storage import resolve_storage


def _ledger(tmp_path: Path) -> Ledger:
    storage = resolve_storage(tmp_path)
    ledger = Ledger(storage, "r", engine_for(storage))
    ledger.once("c1:s0:llm", 1, lambda _conn: ({"content": 5}, []))
    return ledger


def _use(record: dict[str, Any]) -> str:
    return "text: " + record["content"]


def test_a_record_its_step_cannot_use_is_named_with_the_reason(tmp_path: Path) -> None:
    ledger = _ledger(tmp_path)
    recorded = ledger.once("c1:s0:llm", 1, lambda _conn: pytest.fail("acted twice"))
    with pytest.raises(BadRecordError) as caught:
        ledger.used("c1:s0:llm", 1, recorded, _use, dict, "nothing")
    assert caught.value.key == "c1:s0:llm"
    assert str(caught.value) == (
        "the journaled record c1:s0:llm cannot be replayed "
        '(can only concatenate str (not "int") to str)'
    )
    assert ledger.recall("c1:s0:llm") == {"content": 5}, "nothing changes without the skip"


def test_skipping_replaces_the_record_and_records_why_at_once(tmp_path: Path) -> None:
    ledger = _ledger(tmp_path)
    recorded = ledger.recall("c1:s0:llm")
    token = skip_bad_records.set(True)
    try:
        used = ledger.used("c1:s0:llm", 1, recorded, _use, lambda: {"content": ""}, "empty")
    finally:
        skip_bad_records.reset(token)
    assert used == "text: "
    assert ledger.recall("c1:s0:llm") == {"content": ""}
    events = read_events(ledger.engine, "r")
    assert [(e["event_type"], e["payload"]["key"], e["payload"]["becomes"]) for e in events] == [
        ("RECORD_SKIPPED", "c1:s0:llm", "empty")
    ]
    # The stand-in is what every later replay finds: no second skip.
    assert ledger.used("c1:s0:llm", 1, ledger.recall("c1:s0:llm"), _use, dict, "x") == "text: "


def test_a_long_reason_is_cut(tmp_path: Path) -> None:
    ledger = _ledger(tmp_path)

    def fails(_record: Any) -> None:
        raise ValueError("x" * 5000 + "\nsecond line")

    with pytest.raises(BadRecordError) as caught:
        ledger.used("c1:s0:llm", 1, {}, fails, dict, "nothing")
    assert len(str(caught.value)) < 250 and "second line" not in str(caught.value)
