"""One run's records as table rows: its registry row, events, tool calls, memory, messages.

`analysis.study` assembles a study's tables from these rows; each function here reads one
kind of record of one run (mostly from its event log, read once) and knows nothing of the
other runs, DataFrames or files.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict
from typing import Any

from sqlalchemy import Engine

from contreact.analysis.metrics import TABLE1_KEYS, run_summary
from contreact.analysis.pei.results import PeiResult
from contreact.analysis.runs import replicate_of
from contreact.checkpoints.event_schema import Intervention, OperatorMessage, ToolCall
from contreact.checkpoints.fork import MEMORY_EVENTS, replay_event
from contreact.checkpoints.registry import RunRecord


def flat_columns(value: Any, prefix: str) -> dict[str, Any]:
    """A nested mapping as `a.b.c` columns; lists as JSON text (one cell per value)."""
    if isinstance(value, dict):
        flat: dict[str, Any] = {}
        for key, inner in value.items():
            flat.update(flat_columns(inner, f"{prefix}.{key}" if prefix else str(key)))
        return flat
    if isinstance(value, list):
        return {prefix: json.dumps(value, ensure_ascii=False)}
    return {prefix: value}


def json_text(value: Any) -> str:
    """`value` as JSON text: keys sorted, non-ASCII kept."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def run_row(engine: Engine, run: RunRecord, log: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One run: its registry record, Table 1 totals, config, and its first RUN_START.

    The RUN_START payload (model, host, options, seed, and whatever provenance the
    engine records there) is flattened into `start.*` columns, so fields it gains later
    appear without a change here.
    """
    summary = run_summary(engine, run)
    start: dict[str, Any] = next((e["payload"] for e in log if e["event_type"] == "RUN_START"), {})
    return {
        "run_id": run.run_id,
        "model": run.model,
        "batch": run.batch,
        "replicate": replicate_of(run.run_id) if run.batch else None,
        "status": run.status,
        "reason": run.reason,
        "host": run.host,
        "origin": run.origin,
        "parent_run_id": run.parent_run_id,
        "fork_cycle": run.fork_cycle,
        "created_at": run.created_at,
        "updated_at": run.updated_at,
        "cycles": summary.cycles,
        **{key: summary.values[key] for key in TABLE1_KEYS},
        **{f"total_{key}": value for key, value in summary.extras.items()},
        "config": json_text(run.config),
        **flat_columns(start, "start"),
    }


def event_rows(run_id: str, log: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """A run's events in log order; `seq` counts from 1, `payload` is JSON text."""
    return [
        {
            "run_id": run_id,
            "seq": seq,
            "cycle": line["cycle_number"],
            "event_type": line["event_type"],
            "timestamp": line["timestamp"],
            "payload": json_text(line["payload"]),
        }
        for seq, line in enumerate(log, start=1)
    ]


def _calls(log: Sequence[dict[str, Any]]) -> Iterable[tuple[int, int, ToolCall]]:
    for seq, line in enumerate(log, start=1):
        if line["event_type"] == ToolCall.event_type:
            yield int(line["cycle_number"]), seq, ToolCall.read(line["payload"])


def tool_call_rows(run_id: str, log: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every tool call the run made, with its arguments (JSON text) and its output."""
    return [
        {
            "run_id": run_id,
            "cycle": cycle,
            "seq": seq,
            "step": call.step,
            "call_id": call.call_id,
            "tool_name": call.tool_name,
            "parameters": json_text(call.parameters),
            "output": call.output,
            "error": call.error,
            "refused": call.refused,
            "truncated": call.truncated,
            "duration_s": float(call.duration_s),
        }
        for cycle, seq, call in _calls(log)
    ]


def operator_message_rows(run_id: str, log: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every message the agent sent the operator, the reply and when it came."""
    rows = []
    for seq, line in enumerate(log, start=1):
        if line["event_type"] == OperatorMessage.event_type:
            sent = OperatorMessage.read(line["payload"])
            rows.append(
                {
                    "run_id": run_id,
                    "cycle": int(line["cycle_number"]),
                    "seq": seq,
                    "step": sent.step,
                    "message": sent.message,
                    "reply": sent.reply,
                    "replied_at": line["timestamp"],
                    "policy": sent.policy,
                    "wait_s": None if sent.wait_s is None else float(sent.wait_s),
                }
            )
    return rows


def intervention_rows(run_id: str, log: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every intervention of the run's config that acted (`detail` as JSON text)."""
    rows = []
    for seq, line in enumerate(log, start=1):
        if line["event_type"] == Intervention.event_type:
            acted = Intervention.read(line["payload"])
            rows.append(
                {
                    "run_id": run_id,
                    "cycle": int(line["cycle_number"]),
                    "seq": seq,
                    "index": acted.index,
                    "kind": acted.kind,
                    "detail": json_text(acted.detail),
                    "step": acted.step,
                    "tool_name": acted.tool_name,
                    "timestamp": line["timestamp"],
                }
            )
    return rows


def memory_rows(
    run_id: str, log: Sequence[dict[str, Any]], finished: Sequence[int]
) -> list[dict[str, Any]]:
    """The memory at the end of each finished cycle: one row per (cycle, key).

    Rebuilt by replaying the run's logged tool calls and memory wipes (as a fork rebuilds
    it), since the database keeps only the memory as it is now.
    """
    changes = [
        (int(line["cycle_number"]), str(line["event_type"]), line["payload"])
        for line in log
        if line["event_type"] in MEMORY_EVENTS
    ]
    memory: dict[str, str] = {}
    rows: list[dict[str, Any]] = []
    applied = 0
    for cycle in sorted(finished):
        while applied < len(changes) and changes[applied][0] <= cycle:
            replay_event(memory, changes[applied][1], changes[applied][2])
            applied += 1
        rows += [
            {"run_id": run_id, "cycle": cycle, "key": key, "value": value}
            for key, value in sorted(memory.items())
        ]
    return rows


def pei_rows(results: Sequence[PeiResult], models: dict[str, str]) -> list[dict[str, Any]]:
    """Stored PEI ratings; `model` is the rated run's, `omitted` says what was left out."""
    return [
        {
            "run_id": r.run_id,
            "model": models.get(r.run_id, ""),
            **asdict(r),
            "omitted": r.omitted_text(),
        }
        for r in results
    ]
