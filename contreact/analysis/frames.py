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

from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine

from contreact.analysis.metrics import cycle_table
from contreact.analysis.pei.results import PeiResult, stored_results
from contreact.analysis.runs import run_order, select_runs
from contreact.analysis.table_rows import (
    event_rows,
    intervention_rows,
    json_text,
    memory_rows,
    operator_message_rows,
    pei_rows,
    run_row,
    tool_call_rows,
)
from contreact.checkpoints.engines import engine_for
from contreact.checkpoints.event_store import read_events
from contreact.checkpoints.registry import RunRecord
from contreact.checkpoints.storage import Storage, resolve_storage
from contreact.errors import MissingExtraError

if TYPE_CHECKING:
    import pandas as pd

TABLES: tuple[str, ...] = (
    "runs",
    "cycles",
    "events",
    "tool_calls",
    "memory",
    "operator_messages",
    "interventions",
    "pei",
)
"""The study's tables, in the order they are documented and exported."""

INSTALL_HINT = "pip install 'contreact[analysis]'"

FIXED_COLUMNS: dict[str, tuple[str, ...]] = {
    "events": ("run_id", "batch", "seq", "cycle", "event_type", "timestamp", "payload"),
    "tool_calls": (
        "run_id",
        "batch",
        "cycle",
        "seq",
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
    "memory": ("run_id", "batch", "cycle", "key", "value"),
    "operator_messages": (
        "run_id",
        "batch",
        "cycle",
        "seq",
        "step",
        "message",
        "reply",
        "replied_at",
        "policy",
        "wait_s",
    ),
    "interventions": (
        "run_id",
        "batch",
        "cycle",
        "seq",
        "index",
        "kind",
        "detail",
        "step",
        "tool_name",
        "timestamp",
    ),
    "pei": (
        "run_id",
        "batch",
        "model",
        *(f.name for f in fields(PeiResult) if f.name != "run_id"),
    ),
}
"""Tables whose columns do not depend on the runs (an empty table still has them)."""

TIMES: dict[str, tuple[str, ...]] = {
    "runs": ("created_at", "updated_at"),
    "events": ("timestamp",),
    "operator_messages": ("replied_at",),
    "interventions": ("timestamp",),
    "pei": ("created_at",),
}
"""Columns of ISO-8601 UTC text that a DataFrame holds as timezone-aware datetimes (and
every flattened `*.recorded_at`, such as `start.provenance.recorded_at`)."""

INTEGERS: dict[str, tuple[str, ...]] = {
    "runs": ("replicate", "fork_cycle"),
    "interventions": ("step",),
    "pei": ("level",),
}
"""Whole-number columns that may be empty: nullable integers, never floats."""

NUMBERS: dict[str, dict[str, str]] = {
    "events": {"seq": "int64", "cycle": "int64"},
    "tool_calls": {
        "cycle": "int64",
        "seq": "int64",
        "step": "int64",
        "error": "bool",
        "refused": "bool",
        "truncated": "bool",
        "duration_s": "float64",
    },
    "memory": {"cycle": "int64"},
    "operator_messages": {"cycle": "int64", "seq": "int64", "step": "int64", "wait_s": "float64"},
    "interventions": {"cycle": "int64", "seq": "int64", "index": "int64"},
    "pei": {"at_cycle": "int64", "manual": "bool", "repeat": "int64"},
}
"""The types of an empty table's columns that are not text (a table with rows infers them)."""

ORDER: dict[str, tuple[str, ...]] = {
    "cycles": ("cycle",),
    "events": ("cycle", "seq"),
    "tool_calls": ("cycle", "seq"),
    "memory": ("cycle", "key"),
    "operator_messages": ("cycle", "seq"),
    "interventions": ("cycle", "seq"),
    "pei": ("evaluator", "repeat"),
}
"""How each table's rows are sorted within a run (runs themselves by `run_order`)."""


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
        {k: (json_text(v) if k in mixed and v is not None else v) for k, v in row.items()}
        for row in rows
    ]


def _with_batch(rows: list[dict[str, Any]], batch: str | None) -> list[dict[str, Any]]:
    """`rows` with the run's `batch` right after `run_id`."""
    return [{"run_id": row["run_id"], "batch": batch, **row} for row in rows]


def sorted_rows(name: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A table's rows by run (`run_order`), then as `ORDER` says, whatever order they came in."""
    within = ORDER.get(name, ())

    def last_if_missing(value: Any) -> tuple[bool, Any]:
        # A missing value sorts last and is never compared with a present one.
        return (True, 0) if value is None else (False, value)

    def key(row: dict[str, Any]) -> tuple[Any, ...]:
        return (run_order(str(row["run_id"])), *(last_if_missing(row.get(c)) for c in within))

    return sorted(rows, key=key)


def tables_of(engine: Engine, runs: Sequence[RunRecord]) -> dict[str, list[dict[str, Any]]]:
    """Every table of a study (`TABLES`) as rows, sorted by run, cycle and sequence."""
    tables: dict[str, list[dict[str, Any]]] = {name: [] for name in TABLES}
    for run in runs:
        log = read_events(engine, run.run_id)
        cycles = cycle_table(engine, run, with_reflection=True)
        tables["runs"].append(run_row(engine, run, log))
        tables["cycles"] += _with_batch(cycles, run.batch)
        tables["events"] += _with_batch(event_rows(run.run_id, log), run.batch)
        tables["tool_calls"] += _with_batch(tool_call_rows(run.run_id, log), run.batch)
        finished = [row["cycle"] for row in cycles]
        tables["memory"] += _with_batch(memory_rows(run.run_id, log, finished), run.batch)
        tables["operator_messages"] += _with_batch(
            operator_message_rows(run.run_id, log), run.batch
        )
        tables["interventions"] += _with_batch(intervention_rows(run.run_id, log), run.batch)
    models = {run.run_id: run.model for run in runs}
    batches = {run.run_id: run.batch for run in runs}
    ratings = pei_rows(stored_results(engine, list(models), repeats=True), models)
    tables["pei"] = [{"batch": batches.get(row["run_id"]), **row} for row in ratings]
    # A tool only some runs called has a column in every run's rows: zero calls, not NaN.
    tool_columns = {k for row in tables["cycles"] for k in row if k.startswith("calls_")}
    for row in tables["cycles"]:
        for column in tool_columns - row.keys():
            row[column] = 0
    return {name: one_type_per_column(sorted_rows(name, rows)) for name, rows in tables.items()}


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
    """One table's rows as a DataFrame (columns as `columns` orders them).

    Times are timezone-aware (UTC) datetimes and whole numbers that may be missing are
    nullable integers, so a parquet file keeps the same types.
    """
    pandas = require_pandas()
    table = pandas.DataFrame(list(rows), columns=columns(name, rows))
    if table.empty:
        kinds = NUMBERS.get(name, {})
        table = table.astype({c: kinds.get(c, str) for c in table.columns})
    recorded = [c for c in table.columns if str(c).endswith(".recorded_at")]
    for column in (*TIMES.get(name, ()), *recorded):
        if column in table:
            # One unit (microseconds, what the records hold), however many rows there are.
            times = pandas.to_datetime(table[column], utc=True, format="ISO8601")
            table[column] = times.astype("datetime64[us, UTC]")
    for column in INTEGERS.get(name, ()):
        if column in table:
            table[column] = table[column].astype("Int64")
    return table


@dataclass(frozen=True)
class RunTables:
    """Runs as pandas DataFrames, joined on `run_id` (and `cycle`).

    Attributes:
        runs: One row per run: its registry record (model, batch, status, ...), its
            `replicate` (N of a batch run `<batch>.<model>.rN`; empty outside a batch), the
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
        operator_messages: Every message the agent sent the operator: cycle, `seq` in
            the run's events, the message, the reply and when it came (`replied_at`).
        interventions: Every intervention of the run's config that acted: cycle,
            `seq`, its `index` in the config, `kind`, `detail` (JSON text) and time.
        pei: The stored PEI ratings of these runs: one row per run, evaluator and
            `repeat` (1 unless `pei --repeat` asked again), with the rated run's
            `model`, the level and the evaluator's answer.

    Every table has `batch`; rows are sorted by run (`b.m.r2` before `b.m.r10`), then
    cycle, then `seq`; times are timezone-aware (UTC) datetimes.
    """

    runs: pd.DataFrame
    cycles: pd.DataFrame
    events: pd.DataFrame
    tool_calls: pd.DataFrame
    memory: pd.DataFrame
    operator_messages: pd.DataFrame
    interventions: pd.DataFrame
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
    rows = tables_of(engine, select_runs(engine, _names(runs), _names(batch)))
    return RunTables(**{name: frame(name, rows[name]) for name in TABLES})
