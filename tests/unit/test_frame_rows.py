"""The study's rows from a hand-written log: memory at cycle ends, flat columns, one type each."""

from __future__ import annotations

from typing import Any

import pandas as pd

from contreact.analysis.frames import columns, frame, one_type_per_column
from contreact.analysis.table_rows import flat_columns, memory_rows, tool_call_rows


def tool_call(cycle: int, name: str, **parameters: str) -> dict[str, Any]:
    flags = {"error": parameters.pop("error", "") == "yes", "refused": False}
    if parameters.pop("refused", "") == "yes":
        flags["refused"] = True
    payload = {"tool_name": name, "parameters": parameters, "output": "", **flags}
    return {"cycle_number": cycle, "event_type": "TOOL_CALL", "payload": payload}


LOG = [
    {"cycle_number": 1, "event_type": "CYCLE_START", "payload": {}},
    tool_call(1, "write", key="a", value="1"),
    tool_call(1, "write", key="b", value="2"),
    tool_call(2, "delete", key="a"),
    tool_call(2, "write", key="c", value="3", error="yes"),  # failed: nothing stored
    tool_call(2, "write", key="d", value="4", refused="yes"),  # refused: never ran
    tool_call(3, "read", key="b"),
    tool_call(4, "write", key="b", value="22"),
]


def test_memory_at_each_cycle_end_replays_the_calls_that_changed_it() -> None:
    rows = memory_rows("r", LOG, [1, 2, 3])  # cycle 4 did not finish: no row for it
    held = [(row["cycle"], row["key"], row["value"]) for row in rows]
    assert held == [(1, "a", "1"), (1, "b", "2"), (2, "b", "2"), (3, "b", "2")]
    assert memory_rows("r", LOG, [4])[0]["value"] == "22"


def test_a_memory_wipe_intervention_empties_the_memory_from_its_cycle_on() -> None:
    wipe = {
        "cycle_number": 3,
        "event_type": "INTERVENTION",
        "payload": {"index": 0, "kind": "memory", "detail": {"clear": True, "deleted": 1}},
    }
    message = {**wipe, "payload": {"index": 1, "kind": "operator_message", "detail": {}}}
    log = [*LOG[:6], message, wipe, *LOG[6:]]
    held = [(row["cycle"], row["key"]) for row in memory_rows("r", log, [2, 3, 4])]
    assert held == [(2, "b"), (4, "b")]  # cycle 3 ended empty; cycle 4 wrote b again


def test_tool_calls_keep_their_arguments_as_json_text() -> None:
    (first, *_) = tool_call_rows("r", LOG)
    assert (first["cycle"], first["tool_name"], first["parameters"]) == (
        1, "write", '{"key": "a", "value": "1"}'
    )  # fmt: skip
    assert len(tool_call_rows("r", LOG)) == 7


def test_a_nested_record_becomes_dotted_columns() -> None:
    start = {"seed": 1, "options": {"temperature": 0.6, "stop": ["a"]}, "tools": {"mode": "x"}}
    assert flat_columns(start, "start") == {
        "start.seed": 1,
        "start.options.temperature": 0.6,
        "start.options.stop": '["a"]',
        "start.tools.mode": "x",
    }


def test_a_column_of_mixed_types_becomes_json_text_so_parquet_can_hold_it() -> None:
    rows = [
        {"reasoning": True, "n": 1, "note": None},
        {"reasoning": "high", "n": 2.5, "note": "x"},
        {"reasoning": None, "n": 3, "note": None},
    ]
    uniform = one_type_per_column(rows)
    assert [r["reasoning"] for r in uniform] == ["true", '"high"', None]
    assert [r["n"] for r in uniform] == [1, 2.5, 3]  # numbers of both kinds stay numbers
    assert [r["note"] for r in uniform] == [None, "x", None]


def test_empty_tables_still_have_their_columns(tmp_path: Any) -> None:
    assert columns("memory", []) == ["run_id", "batch", "cycle", "key", "value"]
    empty = frame("pei", [])
    assert list(empty.columns)[:4] == ["run_id", "batch", "model", "evaluator"] and empty.empty
    path = tmp_path / "t.parquet"
    table = frame(
        "runs", one_type_per_column([{"run_id": "r", "x": True}, {"run_id": "s", "x": "high"}])
    )
    table.to_parquet(path, index=False)
    pd.testing.assert_frame_equal(pd.read_parquet(path), table)
