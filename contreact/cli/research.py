"""Research commands: `contreact pei`, `report` and `export`.

Thin: parse the arguments, call `contreact.analysis`, print what came out. Input a
researcher must fix (unknown run or batch, an unfinished run for PEI, an unknown export
format) exits 2 with one line; an evaluator run that fails exits 1 after every other
evaluation has been done and stored.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, TypeVar

import typer

from contreact.cli.app import MANY, BadInputError, command, cycle_span, err, fail, out, storage
from contreact.cli.output import emit_json, emit_table

T = TypeVar("T")


def _checked(action: Callable[[], T]) -> T:
    """Run an analysis call, turning its input errors into the CLI's exit-2 errors."""
    from contreact.analysis.runs import AnalysisInputError

    try:
        return action()
    except AnalysisInputError as exc:
        raise BadInputError(str(exc)) from None


RunsArg = Annotated[list[str] | None, typer.Argument(help="Run ids.", show_default=False)]
BatchOpt = Annotated[
    str | None, typer.Option("--batch", help="Every run of this batch (with or instead of RUN).")
]


@command()
def pei(
    runs: RunsArg = None,
    evaluator: Annotated[
        list[str] | None,
        typer.Option("--evaluator", "-e", help="Evaluator model (repeat for several)."),
    ] = None,
    batch: BatchOpt = None,
    num_ctx: Annotated[
        int | None,
        typer.Option("--num-ctx", help="Evaluator context (default: each run's pei.num_ctx)."),
    ] = None,
    set_level: Annotated[
        bool,
        typer.Option("--set", help="Record a level by hand: pei --set RUN EVALUATOR LEVEL."),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Rate finished runs on the PEI scale (Szeider 2025, Box 2) by each evaluator model.

    Each evaluator is given the run's whole history (every cycle's turns, tool calls,
    tool results and reflections; the oldest left out first when it exceeds --num-ctx)
    and the PEI question, with no tools; the level is parsed and stored. Running it again
    reuses stored ratings. `pei --set RUN EVALUATOR LEVEL` records a level by hand.
    """
    from contreact.analysis.agreement import describe
    from contreact.analysis.pei.evaluation import PeiFailure, evaluate
    from contreact.analysis.pei.evaluation import set_level as record_level
    from contreact.analysis.pei.matrix import build_matrix
    from contreact.analysis.pei.results import PeiResult
    from contreact.analysis.runs import select_runs
    from contreact.checkpoints.engines import engine_for
    from contreact.evaluate import ask_evaluator

    def manual() -> None:
        args = list(runs or [])
        if len(args) != 3 or not args[2].isdigit():
            raise BadInputError("use: contreact pei --set RUN EVALUATOR LEVEL (LEVEL 1-10)")
        where = storage()
        run = _checked(lambda: select_runs(engine_for(where), [args[0]]))[0]
        result = _checked(lambda: record_level(where, run, args[1], int(args[2])))
        out.print(
            f"{result.run_id} × {result.evaluator}: PEI {result.level} (manual)", markup=False
        )

    if set_level:
        manual()
        return
    where = storage()
    engine = engine_for(where)
    chosen = _checked(lambda: select_runs(engine, runs, batch))
    names = [e for item in evaluator or [] for e in item.split(",") if e.strip()]

    def show(item: PeiResult | PeiFailure, reused: bool) -> None:
        if as_json:
            return
        if isinstance(item, PeiFailure):
            err.print(f"{item.run_id} × {item.evaluator}: failed ({item.reason})", markup=False)
            return
        level = item.level if item.level is not None else f"no level ({item.reason})"
        note = " (stored earlier)" if reused else ""
        note += " (manual)" if item.manual else ""
        out.print(
            f"{item.run_id} × {item.evaluator}: PEI {level}{note} [{item.omitted_text()}]",
            markup=False,
        )

    outcome = _checked(
        lambda: evaluate(where, chosen, names, ask=ask_evaluator, num_ctx=num_ctx, report=show)
    )
    columns = list(dict.fromkeys(e.strip() for e in names))
    matrix = build_matrix(outcome.results, chosen, columns)
    agreements = matrix.agreement()
    if as_json:
        payload = {
            "results": [r.__dict__ for r in outcome.results],
            "failures": [f.__dict__ for f in outcome.failures],
            "matrix": {"rows": matrix.rows, "columns": matrix.columns, "cells": matrix.cells},
            "model_matrix": {
                "rows": (by_model := matrix.by_model()).rows,
                "columns": by_model.columns,
                "cells": by_model.cells,
            },
            "evaluator_means": dict(zip(matrix.columns, matrix.evaluator_means, strict=True)),
            "agreement": [a.__dict__ for a in agreements],
        }
        emit_json(payload)
    else:
        rows = [
            [label, *("–" if v is None else f"{v:g}" for v in row)]
            for label, row in zip(matrix.rows, matrix.cells, strict=True)
        ]
        means = matrix.evaluator_means
        rows.append(["mean", *("–" if v is None else f"{v:.2f}" for v in means)])
        emit_table(["history \\ evaluator", *matrix.columns], rows)
        for agreement in agreements:
            out.print(describe(agreement), markup=False)
    if outcome.failures:
        fail(f"{len(outcome.failures)} of the PEI evaluations failed (see above)", 1)


def _default_out(batch: str | None, run_ids: list[str]) -> Path:
    if batch:
        label = f"batch-{batch}"
    elif len(run_ids) == 1:
        label = run_ids[0]
    else:
        label = "runs-" + datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    return storage().data_dir / "reports" / label


@command()
def report(
    runs: RunsArg = None,
    batch: BatchOpt = None,
    out_dir: Annotated[
        Path | None,
        typer.Option("--out", help="Output folder (default: DATA_DIR/reports/<batch or run>)."),
    ] = None,
    lexical: Annotated[
        bool,
        typer.Option("--lexical", help="TF-IDF similarity heatmaps, never an embedding model."),
    ] = False,
    cycles: Annotated[
        str | None,
        typer.Option(
            "--cycles",
            help="Only cycles A-B (or A-, or B) in the per-cycle table, plots and heatmaps.",
        ),
    ] = None,
) -> None:
    """Write tables (CSV, Markdown), plots (PNG) and one self-contained HTML report."""
    from contreact.analysis.report import build_report
    from contreact.analysis.runs import select_runs
    from contreact.checkpoints.engines import engine_for

    where = storage()
    chosen = _checked(lambda: select_runs(engine_for(where), runs, batch))
    target = out_dir or _default_out(batch, [r.run_id for r in chosen])
    if batch:
        title = f"contreact report: batch {batch}"
    elif len(chosen) == 1:
        title = f"contreact report: run {chosen[0].run_id}"
    else:
        title = f"contreact report: {len(chosen)} runs"
    span = cycle_span(cycles) if cycles is not None else None
    if span is not None:
        title += f", cycles {span[0]}-{span[1] if span[1] < MANY else ''}"
    files = build_report(where, chosen, target, title=title, lexical=lexical, cycles=span)
    out.print(f"Report of {len(chosen)} run(s) in {files.out_dir}", markup=False)
    out.print(f"  {files.html}", markup=False)
    out.print(f"  {files.markdown}", markup=False)
    for path in [*files.csv, *files.png]:
        out.print(f"  {path}", markup=False)


@command()
def export(
    run_id: Annotated[str, typer.Argument(help="The run.")],
    fmt: Annotated[
        str, typer.Option("--format", "-f", help="jsonl (event log) or csv (one row per cycle).")
    ] = "jsonl",
    out_file: Annotated[
        Path | None, typer.Option("--out", "-o", help="Write to this file instead of stdout.")
    ] = None,
) -> None:
    """Export a run: its event log as JSON lines, or its cycles as CSV."""
    from contreact.analysis.export import export_run
    from contreact.checkpoints.engines import engine_for

    try:
        engine = engine_for(storage())
        if out_file is None:
            _checked(lambda: export_run(engine, run_id, fmt, sys.stdout))
            return
        out_file.parent.mkdir(parents=True, exist_ok=True)
        partial = out_file.with_name(out_file.name + ".partial")
        with partial.open("w", encoding="utf-8", newline="") as fh:
            count = _checked(lambda: export_run(engine, run_id, fmt, fh))
        partial.replace(out_file)
        err.print(f"wrote {count} rows to {out_file}", markup=False)
    finally:
        if out_file is not None:
            out_file.with_name(out_file.name + ".partial").unlink(missing_ok=True)
