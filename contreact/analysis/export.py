"""`contreact export`: a run's data out of the database, for tools that are not contreact.

The database is the source of truth (the JSONL file under `logs/` is a mirror that may
lag a crash), so `jsonl` re-reads the event log from the database in commit order, in
the same line shape as the mirror. `csv` is one row per finished cycle with its metrics,
the table a spreadsheet or pandas wants. A batch is exported as the study's tables
(`analysis.study`: runs, cycles, events, tool calls, memory, PEI), one file per table, so
the files hold what `contreact.load` gives a notebook.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from sqlalchemy import Engine

from contreact.analysis.csv_writer import write_csv
from contreact.analysis.metrics import cycle_table
from contreact.analysis.runs import AnalysisInputError
from contreact.checkpoints.event_store import iter_events
from contreact.checkpoints.registry import RunRecord, get_run

FORMATS = ("jsonl", "csv")
TABLE_FORMATS = ("parquet", "csv", "jsonl")
"""Formats of a study's tables (`export_tables`)."""


def export_jsonl(engine: Engine, run_id: str, stream: TextIO) -> int:
    """Write the run's event log, one JSON object per line; returns the number of events."""
    count = 0
    for line in iter_events(engine, run_id):
        stream.write(json.dumps(line, ensure_ascii=False) + "\n")
        count += 1
    return count


def export_csv(engine: Engine, run_id: str, stream: TextIO) -> int:
    """Write one CSV row per finished cycle: metrics, tool calls, similarity, reflection."""
    return write_csv(cycle_table(engine, get_run(engine, run_id), with_reflection=True), stream)


def export_run(engine: Engine, run_id: str, fmt: str, stream: TextIO) -> int:
    """Export `run_id` in `fmt` (`jsonl` or `csv`) to `stream`; returns rows written.

    Raises:
        AnalysisInputError: Unknown format.
        RunNotFoundError: Unknown run.
    """
    if fmt == "parquet":
        raise AnalysisInputError(
            "a run exports as jsonl or csv; parquet holds a batch's tables: "
            "contreact export --batch NAME --format parquet"
        )
    if fmt not in FORMATS:
        raise AnalysisInputError(f"unknown export format {fmt!r}; use one of: {', '.join(FORMATS)}")
    get_run(engine, run_id)
    if fmt == "jsonl":
        return export_jsonl(engine, run_id, stream)
    return export_csv(engine, run_id, stream)


def export_tables(
    engine: Engine, runs: Sequence[RunRecord], fmt: str, out_dir: Path
) -> list[tuple[Path, int]]:
    """Write the study of `runs` into `out_dir`, one `<table>.<fmt>` file per table.

    Each file is written beside its place and then moved there, so an interrupted export
    never leaves a half-written table under the final name.

    Returns:
        `(file, rows)` of every table written, in `study.TABLES` order.

    Raises:
        AnalysisInputError: Unknown format.
        MissingExtraError: `parquet` without pandas and pyarrow.
    """
    from contreact.analysis.frames import TABLES, columns, frame, require_pandas, tables_of

    if fmt not in TABLE_FORMATS:
        raise AnalysisInputError(
            f"unknown export format {fmt!r}; use one of: {', '.join(TABLE_FORMATS)}"
        )
    if fmt == "parquet":
        require_pandas()
    tables = tables_of(engine, runs)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name in TABLES:
        rows = tables[name]
        path = out_dir / f"{name}.{fmt}"
        partial = path.with_name(path.name + ".partial")
        try:
            if fmt == "parquet":
                frame(name, rows).to_parquet(partial, index=False)
            else:
                with partial.open("w", encoding="utf-8", newline="") as fh:
                    if fmt == "csv":
                        write_csv(rows, fh, columns(name, rows))
                    else:
                        for row in rows:
                            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
            partial.replace(path)
        finally:
            partial.unlink(missing_ok=True)
        written.append((path, len(rows)))
    return written
