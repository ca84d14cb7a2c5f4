"""Runs as tables: `contreact.load(...)` for notebooks, `export --batch` for files.

A researcher analysing runs wants them in pandas, not behind a command: one table per
kind of record, with `run_id` (and `cycle`) columns to join on. This module builds those
tables once, as plain rows, from what the engine stored: the registry, the cycles (through
`analysis.metrics`, so each metric keeps the one definition the engine wrote down), the
event log, and the PEI ratings. `load` turns the rows into DataFrames; `export --batch`
writes the same rows as CSV, JSON lines or parquet, so a file and a notebook never differ.

pandas and pyarrow are the optional `analysis` extra: the base install, `import contreact`
and the CLI never import them, and asking for a DataFrame without them says what to install.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine

from contreact.analysis.metrics import TABLE1_KEYS, cycle_table, run_summary
from contreact.analysis.pei.results import PeiResult, stored_results
from contreact.analysis.runs import select_runs
from contreact.checkpoints.engines import engine_for
from contreact.checkpoints.event_schema import ToolCall
from contreact.checkpoints.event_store import read_events
from contreact.checkpoints.fork import MEMORY_EVENTS, replay_event
from contreact.checkpoints.registry import RunRecord
from contreact.checkpoints.storage import Storage, resolve_storage
from contreact.errors import MissingExtraError

if TYPE_CHECKING:
    import pandas as pd

TABLES: tuple[str, ...] = ("runs", "cycles", "events", "tool_calls", "memory", "pei")
"""The tables, in the order they are documented and exported."""

INSTALL_HINT = "pip install 'contreact[analysis]'"

FIXED_COLUMNS: dict[str, tuple[str, ...]] = {
    "events": ("run_id", "seq", "cycle", "event_type", "timestamp", "payload"),
    "tool_calls": (
        "run_id",
        "cycle",
        "step",
        "call_id",
        "tool_name",
        "parameters",
        "output",
        "error",
        "refused",
        "truncated",
        "duration_s",
    ),
    "memory": ("run_id", "cycle", "key", "value"),
    "pei": ("run_id", "model", *(f.name for f in fields(PeiResult) if f.name != "run_id")),
}
"""Tables whose columns do not depend on the runs (an empty table still has them)."""


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


def _json(value: Any) -> str:
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
        "config": _json(run.config),
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
            "payload": _json(line["payload"]),
        }
        for seq, line in enumerate(log, start=1)
    ]


def _calls(log: Sequence[dict[str, Any]]) -> Iterable[tuple[int, ToolCall]]:
    for line in log:
        if line["event_type"] == ToolCall.event_type:
            yield int(line["cycle_number"]), ToolCall.read(line["payload"])


def tool_call_rows(run_id: str, log: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every tool call the run made, with its arguments (JSON text) and its output."""
    return [
        {
            "run_id": run_id,
            "cycle": cycle,
            "step": call.step,
            "call_id": call.call_id,
            "tool_name": call.tool_name,
            "parameters": _json(call.parameters),
            "output": call.output,
            "error": call.error,
            "refused": call.refused,
            "truncated": call.truncated,
            "duration_s": float(call.duration_s),
        }
        for cycle, call in _calls(log)
    ]


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


def one_type_per_column(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows whose every column holds one type, so a parquet column can store it.

    A column whose values differ in type from run to run (a setting that is `true` in one
    and `"high"` in another) holds JSON text instead; numbers of both kinds are fine.
    """
    kinds: dict[str, set[type]] = {}
    for row in rows:
        for key, value in row.items():
            if value is not None:
                kinds.setdefault(key, set()).add(type(value))
    mixed = {k for k, ts in kinds.items() if len(ts) > 1 and not ts <= {int, float}}
    if not mixed:
        return rows
    return [
        {k: (_json(v) if k in mixed and v is not None else v) for k, v in row.items()}
        for row in rows
    ]


def table_rows(engine: Engine, runs: Sequence[RunRecord]) -> dict[str, list[dict[str, Any]]]:
    """Every table (`TABLES`) as rows, the runs in the order given."""
    tables: dict[str, list[dict[str, Any]]] = {name: [] for name in TABLES}
    for run in runs:
        log = read_events(engine, run.run_id)
        cycles = cycle_table(engine, run, with_reflection=True)
        tables["runs"].append(run_row(engine, run, log))
        tables["cycles"] += cycles
        tables["events"] += event_rows(run.run_id, log)
        tables["tool_calls"] += tool_call_rows(run.run_id, log)
        tables["memory"] += memory_rows(run.run_id, log, [row["cycle"] for row in cycles])
    models = {run.run_id: run.model for run in runs}
    tables["pei"] = pei_rows(stored_results(engine, list(models)), models)
    # A tool only some runs called has a column in every run's rows: zero calls, not NaN.
    tool_columns = {k for row in tables["cycles"] for k in row if k.startswith("calls_")}
    for row in tables["cycles"]:
        for column in tool_columns - row.keys():
            row[column] = 0
    return {name: one_type_per_column(rows) for name, rows in tables.items()}


def columns(name: str, rows: Sequence[dict[str, Any]]) -> list[str]:
    """A table's columns: the fixed ones, or every key in order of first appearance."""
    found = list(dict.fromkeys(key for row in rows for key in row))
    fixed = FIXED_COLUMNS.get(name, ())
    return [*fixed, *(k for k in found if k not in fixed)] or ["run_id"]


def require_pandas() -> Any:
    """The pandas module, or one line saying how to install it.

    Raises:
        MissingExtraError: pandas (or pyarrow, which parquet needs) is not installed.
    """
    try:
        import pandas
        import pyarrow  # noqa: F401  (parquet, and the DataFrames' string columns)
    except ImportError as exc:
        raise MissingExtraError(
            f"contreact's DataFrames and parquet need pandas and pyarrow: {INSTALL_HINT}"
        ) from exc
    return pandas


def frame(name: str, rows: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """One table's rows as a DataFrame (columns as `columns` orders them)."""
    pandas = require_pandas()
    return pandas.DataFrame(list(rows), columns=columns(name, rows))


@dataclass(frozen=True)
class RunTables:
    """Runs as pandas DataFrames, joined on `run_id` (and `cycle`).

    Attributes:
        runs: One row per run: its registry record (model, batch, status, ...), the
            number of finished `cycles`, the run's Table 1 values (`memory_tool_ops`,
            `messages_to_operator`, ...), `total_*` counts (steps, tokens, ...), its
            `config` as JSON text, and its first RUN_START event flattened into
            `start.*` columns (`start.options.seed`, the recorded provenance, ...).
        cycles: Table 1 per cycle, one row per run and finished cycle: the per-cycle
            metrics the engine recorded, `calls_<tool>` counts, similarity to earlier
            reflections, flags and the reflection (the rows of `contreact export RUN
            --format csv`).
        events: The event log of every run, in order (`seq` from 1 per run), with
            `payload` as JSON text (`json.loads` it, or see `tool_calls`).
        tool_calls: One row per tool call: cycle, step, tool, `parameters` (JSON
            text), output, and whether it failed, was refused or truncated.
        memory: The agent's memory at the end of each finished cycle: one row per
            run, cycle and key, with the value.
        pei: The stored PEI ratings of these runs: one row per run and evaluator, with
            the rated run's `model`, the level and the evaluator's answer.
    """

    runs: pd.DataFrame
    cycles: pd.DataFrame
    events: pd.DataFrame
    tool_calls: pd.DataFrame
    memory: pd.DataFrame
    pei: pd.DataFrame

    def tables(self) -> dict[str, pd.DataFrame]:
        """Every table by name, in `TABLES` order."""
        return {name: getattr(self, name) for name in TABLES}


def as_storage(storage: Storage | str | Path | None) -> Storage:
    """A `Storage` from one, a database URL, a data directory, or None.

    None resolves as the CLI does without flags: `CONTREACT_DB_URL`, else the SQLite
    file in `CONTREACT_HOME` or `./runs`.
    """
    if isinstance(storage, Storage):
        return storage
    if storage is None:
        return resolve_storage()
    text = str(storage)
    if "://" in text:
        return resolve_storage(None, text)
    return resolve_storage(text)


def _names(value: str | Sequence[str] | None) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


def load(
    batch: str | Sequence[str] | None = None,
    runs: str | Sequence[str] | None = None,
    storage: Storage | str | Path | None = None,
) -> RunTables:
    """Load runs as a `RunTables` of pandas DataFrames.

    Args:
        batch: A batch name, or several (their runs one after another).
        runs: Run ids, with or instead of a batch.
        storage: Where the runs live: a database URL (`sqlite:///...`,
            `postgresql://...`), a data directory, a `Storage`, or None for what the CLI
            uses without flags (`CONTREACT_DB_URL`, else `CONTREACT_HOME` or `./runs`).

    Returns:
        The runs' tables, documented on `RunTables`.

    Raises:
        MissingExtraError: pandas/pyarrow are not installed (`contreact[analysis]`).
        AnalysisInputError: Nothing was named, or a batch has no runs.
        RunNotFoundError: A named run does not exist.
        StorageNotFoundError: The storage does not exist (nothing is created there).
        StorageFault: The database cannot be reached or used (one line).
    """
    require_pandas()
    engine = engine_for(as_storage(storage).existing())
    rows = table_rows(engine, select_runs(engine, _names(runs), _names(batch)))
    return RunTables(**{name: frame(name, rows[name]) for name in TABLES})
