"""Research commands: `contreact pei`, `report` and `export`.

Thin: parse the arguments, call `contreact.analysis`, print what came out. Input a
researcher must fix (unknown run or batch, an unfinished run named for PEI, an unknown
export format) exits 2 with one line; an evaluator run that fails, or a run of a
`pei --batch` that cannot be rated (named with why, one line each), exits 1 after every
other evaluation has been done and stored.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer

from contreact.cli.app import MANY, BadInputError, command, cycle_span, err, fail, out, storage
from contreact.cli.output import emit_json, emit_table

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from contreact.analysis.pei.matrix import StaleRating

T = TypeVar("T")


def _checked(action: Callable[[], T]) -> T:
    """Run an analysis call, turning its input errors into the CLI's exit-2 errors."""
    from contreact.analysis.runs import AnalysisInputError
    from contreact.errors import MissingExtraError

    try:
        return action()
    except (AnalysisInputError, MissingExtraError) as exc:
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
    refresh: Annotated[
        bool,
        typer.Option(
            "--refresh",
            help="Re-rate stale ratings (made before the run's last cycle); others are reused.",
        ),
    ] = False,
    repeat: Annotated[
        int,
        typer.Option(
            "--repeat",
            help="Ask each evaluator K times (seeds pei.seed, +1, ...) and report its "
            "test-retest consistency.",
            metavar="K",
        ),
    ] = 1,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Rate finished runs on the PEI scale (Szeider 2025, Box 2) by each evaluator model.

    Each evaluator is given the run's whole history (every cycle's turns, tool calls,
    tool results and reflections; the oldest left out first when it exceeds --num-ctx)
    and the PEI question, with no tools and its own options (the run's pei section);
    the level is parsed and stored. Running it again reuses stored ratings; one made
    before the run's last cycle is flagged stale, and --refresh re-rates it. With --batch,
    runs that cannot be rated are named and skipped (exit 1). --repeat K asks every
    question K times under K seeds and reports each evaluator's test-retest consistency.
    `pei --set RUN EVALUATOR LEVEL` records a level by hand.
    """
    from contreact.analysis.agreement import describe
    from contreact.analysis.pei.evaluation import PeiFailure, Status, evaluate
    from contreact.analysis.pei.evaluation import set_level as record_level
    from contreact.analysis.pei.matrix import build_matrix
    from contreact.analysis.pei.results import PeiResult
    from contreact.analysis.pei.retest import self_consistency
    from contreact.analysis.pei.self_rating import self_vs_cross
    from contreact.analysis.runs import in_study_order, select_runs
    from contreact.checkpoints.engines import engine_for
    from contreact.engine.evaluator import ask_evaluator

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
    chosen = in_study_order(_checked(lambda: select_runs(engine, runs, batch)))
    names = [e for item in evaluator or [] for e in item.split(",") if e.strip()]

    def show(item: PeiResult | PeiFailure, status: Status, last_cycle: int) -> None:
        if as_json:
            return
        if isinstance(item, PeiFailure):
            err.print(f"{item.run_id} × {item.evaluator}: failed ({item.reason})", markup=False)
            return
        level = item.level if item.level is not None else f"no level ({item.reason})"
        note = f" (repeat {item.repeat})" if item.repeat > 1 else ""
        note += "" if status == "asked" else " (stored earlier)"
        note += " (manual)" if item.manual else ""
        if status == "stale":
            note += (
                f" (stale: rated at cycle {item.at_cycle} of {last_cycle}; --refresh re-rates it)"
            )
        out.print(
            f"{item.run_id} × {item.evaluator}: PEI {level}{note} [{item.omitted_text()}]",
            markup=False,
        )

    outcome = _checked(
        lambda: evaluate(
            where,
            chosen,
            names,
            ask=ask_evaluator,
            num_ctx=num_ctx,
            report=show,
            refresh=refresh,
            skip_unfinished=batch is not None,
            repeats=repeat,
        )
    )
    rated = [r for r in chosen if r.run_id in outcome.last_cycles]
    columns = list(dict.fromkeys(e.strip() for e in names))
    matrix = build_matrix(outcome.results, rated, columns, outcome.last_cycles)
    by_model = matrix.by_model()
    agreements = matrix.agreement()
    figures = self_vs_cross(matrix)
    retests = self_consistency([*outcome.results, *outcome.repeats], outcome.last_cycles)
    if as_json:
        payload = {
            "results": [
                {
                    **r.__dict__,
                    "last_cycle": outcome.last_cycles[r.run_id],
                    "stale": r.is_stale(outcome.last_cycles[r.run_id]),
                }
                for r in outcome.results
            ],
            "repeats": [r.__dict__ for r in outcome.repeats],
            "failures": [f.__dict__ for f in outcome.failures],
            "skipped": [s.__dict__ for s in outcome.skipped],
            "matrix": {"rows": matrix.rows, "columns": matrix.columns, "cells": matrix.cells},
            "model_matrix": {
                "rows": by_model.rows,
                "columns": by_model.columns,
                "cells": by_model.cells,
            },
            "evaluator_means": dict(zip(matrix.columns, matrix.evaluator_means, strict=True)),
            "agreement": [a.__dict__ for a in agreements],
            "self_vs_cross": [
                {
                    **{k: v for k, v in f.__dict__.items() if k != "interval"},
                    "min_p": f.min_p,
                    "ci_low": f.interval.low if f.interval else None,
                    "ci_high": f.interval.high if f.interval else None,
                }
                for f in figures
            ],
            "test_retest": [
                {
                    "evaluator": r.evaluator,
                    "repeats": r.repeats,
                    "histories": r.histories,
                    "icc": r.icc.__dict__,
                    "alpha": r.alpha.__dict__,
                }
                for r in retests
            ],
            "notes": matrix.notes(),
        }
        emit_json(payload)
    else:
        rows = [
            [
                label,
                *(_pei_cell(v, matrix.stale_at(i, j)) for j, v in enumerate(matrix.cells[i])),
            ]
            for i, label in enumerate(matrix.rows)
        ]
        means = matrix.evaluator_means
        rows.append(["mean", *("–" if v is None else f"{v:.2f}" for v in means)])
        emit_table(["history \\ evaluator", *matrix.columns], rows)
        for note in matrix.notes():
            out.print(f"* {note}", markup=False)
        for agreement in agreements:
            out.print(describe(agreement), markup=False)
        out.print("By model (mean over replicates; the diagonal: self-ratings):", markup=False)
        emit_table(
            ["history model \\ evaluator", *by_model.columns],
            [
                [label, *("–" if v is None else f"{v:g}" for v in row)]
                for label, row in zip(by_model.rows, by_model.cells, strict=True)
            ],
        )
        for figure in figures:
            out.print(f"Self vs cross: {figure.sentence()}", markup=False)
        for retest in retests:
            out.print(f"Test-retest: {retest.sentence()}", markup=False)
    for skipped in outcome.skipped:
        err.print(f"skipped: {skipped.reason}", markup=False)
    problems = []
    if outcome.failures:
        problems.append(f"{len(outcome.failures)} of the PEI evaluations failed")
    if outcome.skipped:
        problems.append(f"{len(outcome.skipped)} run(s) could not be rated")
    if problems:
        fail(" and ".join(problems) + " (see above)", 1)


def _pei_cell(value: float | None, stale: StaleRating | None) -> str:
    """A run-matrix cell; a stale rating shows its level, marked (it is not in the means)."""
    if stale is not None:
        return f"({'–' if stale.level is None else stale.level}) stale*"
    return "–" if value is None else f"{value:g}"


def _default_out(batches: list[str], run_ids: list[str]) -> Path:
    if batches:
        label = "batch-" + "+".join(batches)
    elif len(run_ids) == 1:
        label = run_ids[0]
    else:
        label = "runs-" + datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    return storage().data_dir / "reports" / label


@command()
def report(
    runs: RunsArg = None,
    batch: Annotated[
        list[str] | None,
        typer.Option(
            "--batch",
            help="Every run of this batch (with or instead of RUN); repeat to compare "
            "batches side by side.",
        ),
    ] = None,
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
    """Write tables (CSV, LaTeX, Markdown), figures (PDF, SVG, PNG) and one HTML report.

    Every model-level number has a 95 % bootstrap interval over runs; with --batch A
    --batch B the batches are compared (B − A, paired by model and replicate), and the
    models against each other, with permutation p-values and effect sizes.
    """
    from contreact.analysis.report import build_report
    from contreact.analysis.runs import select_runs
    from contreact.checkpoints.engines import engine_for

    where = storage()
    batches = list(dict.fromkeys(batch or []))
    chosen = _checked(lambda: select_runs(engine_for(where), runs, batches))
    target = out_dir or _default_out(batches, [r.run_id for r in chosen])
    if len(batches) > 1:
        title = "contreact report: batches " + ", ".join(batches[:-1]) + f" and {batches[-1]}"
    elif batches:
        title = f"contreact report: batch {batches[0]}"
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
    for path in [*files.csv, *files.tex, *files.figures]:
        out.print(f"  {path}", markup=False)


@command()
def export(
    runs: Annotated[
        list[str] | None,
        typer.Argument(
            help="The run (or --batch); several with --format inspect.", show_default=False
        ),
    ] = None,
    batch: Annotated[
        str | None,
        typer.Option(
            "--batch",
            help="Export a batch's tables instead: runs, cycles, events, tool_calls, memory, "
            "pei (one file each); with --format inspect, its eval log.",
        ),
    ] = None,
    fmt: Annotated[
        str,
        typer.Option(
            "--format",
            "-f",
            help="A run: jsonl (event log) or csv (one row per cycle). "
            "A batch: parquet, csv or jsonl. Runs or a batch: inspect (Inspect AI eval logs).",
        ),
    ] = "jsonl",
    out_path: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            help="A run: this file instead of stdout. A batch, or inspect logs: this folder "
            "(default: DATA_DIR/exports/<batch>, or DATA_DIR/exports/inspect).",
        ),
    ] = None,
) -> None:
    """Export a run (its event log as JSON lines, or its cycles as CSV) or a batch's tables.

    A batch's tables are those `contreact.load` returns; parquet needs pandas and
    pyarrow, the `analysis` extra.

    `--format inspect` writes Inspect AI eval logs for `inspect view` (one per batch, or
    per run outside a batch; each run a sample); it needs the `inspect` extra.
    """
    from contreact.checkpoints.engines import engine_for

    named = list(dict.fromkeys(runs or []))
    if fmt == "inspect":
        if not named and batch is None:
            raise BadInputError("name runs, or a batch with --batch NAME")
        _export_inspect(engine_for(storage()), named, batch, out_path)
        return
    if len(named) > 1:
        raise BadInputError(
            "name one run (several runs export together only with --format inspect)"
        )
    run_id = named[0] if named else None
    if (run_id is None) == (batch is None):
        raise BadInputError("name a run, or a batch with --batch NAME (not both)")
    engine = engine_for(storage())
    if batch is not None:
        _export_batch(engine, batch, fmt, out_path)
        return
    assert run_id is not None
    _export_run(engine, run_id, fmt, out_path)


def _export_inspect(
    engine: Engine, run_ids: list[str], batch: str | None, out_dir: Path | None
) -> None:
    from contreact.analysis.inspect_log import export_inspect, require_inspect
    from contreact.analysis.runs import select_runs

    _checked(require_inspect)
    chosen = _checked(lambda: select_runs(engine, run_ids, batch))
    target = out_dir or storage().data_dir / "exports" / "inspect"
    for written in _checked(lambda: export_inspect(engine, chosen, target)):
        note = " (runs still going: exported as started)" if written.status == "started" else ""
        err.print(f"wrote {written.samples} sample(s) to {written.path}{note}", markup=False)


def _export_batch(engine: Engine, batch: str, fmt: str, out_dir: Path | None) -> None:
    from contreact.analysis.export import export_tables
    from contreact.analysis.runs import select_runs

    chosen = _checked(lambda: select_runs(engine, None, batch))
    target = out_dir or storage().data_dir / "exports" / batch
    if target.exists() and not target.is_dir():
        raise BadInputError(
            f"--out {target} is a file: a batch is exported into a folder, one file per table"
        )
    try:
        written = _checked(lambda: export_tables(engine, chosen, fmt, target))
    except OSError as exc:
        raise BadInputError(f"cannot write into {target}: {_why(exc)}") from None
    for path, count in written:
        err.print(f"wrote {count} rows to {path}", markup=False)


def _why(exc: OSError) -> str:
    """What the system said, without its error number: `Permission denied`."""
    return exc.strerror or "the system refused"


def _export_run(engine: Engine, run_id: str, fmt: str, out_file: Path | None) -> None:
    from contreact.analysis.export import export_run

    if out_file is not None and out_file.is_dir():
        raise BadInputError(
            f"--out {out_file} is a folder: give the file to write, e.g. "
            f"{out_file / f'{run_id}.{fmt}'}"
        )
    try:
        if out_file is None:
            _checked(lambda: export_run(engine, run_id, fmt, sys.stdout))
            return
        folder = next((p for p in out_file.parents if p.exists()), None)
        if folder is not None and not folder.is_dir():
            raise BadInputError(f"--out {out_file}: {folder} is a file, not a folder")
        try:
            out_file.parent.mkdir(parents=True, exist_ok=True)
            partial = out_file.with_name(out_file.name + ".partial")
            with partial.open("w", encoding="utf-8", newline="") as fh:
                count = _checked(lambda: export_run(engine, run_id, fmt, fh))
            partial.replace(out_file)
        except OSError as exc:
            raise BadInputError(f"cannot write {out_file}: {_why(exc)}") from None
        err.print(f"wrote {count} rows to {out_file}", markup=False)
    finally:
        if out_file is not None:
            with contextlib.suppress(OSError):  # nothing was written there, or cannot be
                out_file.with_name(out_file.name + ".partial").unlink(missing_ok=True)
