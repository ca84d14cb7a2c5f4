"""`contreact report`: tables, plots and one self-contained HTML page for runs or a batch.

A researcher wants the numbers in three forms: CSV to compute with, Markdown to paste
into notes or a paper draft, and a single HTML file to look at and send around. The
HTML embeds its images as data URIs and carries its CSS inline, with no script, so it
opens the same offline, from an e-mail, or years later. Everything is computed from the
stored cycles, events and PEI ratings; nothing is sent to a model, except that a run
configured with an embedding model has its reflection-similarity heatmap embedded the
same way the monitor did (falling back to TF-IDF, and saying so, when it is unreachable).
"""

from __future__ import annotations

import base64
import html
import io
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from checkpoints.cycles import cycle_records
from checkpoints.db import Storage, engine_for
from checkpoints.registry import RunRecord
from contreact.analysis.agreement import Agreement, describe
from contreact.analysis.export import columns_of, write_csv
from contreact.analysis.metrics import (
    EXTRAS,
    TABLE1,
    TABLE1_KEYS,
    ModelSummary,
    RunSummary,
    cycle_table,
    format_mean_sd,
    model_summaries,
    run_summary,
)
from contreact.analysis.pei import PeiMatrix, PeiResult, build_matrix, stored_results
from contreact.analysis.similarity import PairwiseSimilarity, pairwise

PLOTTED: tuple[tuple[str, str], ...] = (
    ("memory_ops_total", "Memory tool ops"),
    ("messages_to_operator", "Messages to operator"),
    ("final_memory_keys", "Memory keys (end of cycle)"),
    ("reflection_chars", "Reflection chars"),
    ("response_chars", "Response chars"),
    ("memory_write_chars", "Memory written chars"),
    ("tokens_out", "Tokens out"),
    ("similarity", "Max similarity to earlier reflections"),
)
"""Per-cycle metrics in the per-cycle plot, one panel each."""

MARKDOWN_CYCLE_COLUMNS = (
    "run_id",
    "cycle",
    "steps",
    "tool_calls",
    "memory_ops_total",
    "messages_to_operator",
    "response_chars",
    "reflection_chars",
    "memory_write_chars",
    "final_memory_keys",
    "tokens_in",
    "tokens_out",
    "similarity",
    "similarity_level",
    "flags",
)
"""The per-cycle columns shown in Markdown and HTML (the CSV has them all)."""

EMBED_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class RunData:
    """What the report shows of one run."""

    run: RunRecord
    cycles: list[dict[str, Any]]
    summary: RunSummary
    similarity: PairwiseSimilarity | None
    reflections: list[tuple[int, str]] = field(default_factory=list)
    """`(cycle, reflection)` of every finished cycle."""


@dataclass(frozen=True)
class ReportData:
    """Everything a report is rendered from."""

    title: str
    generated_at: str
    runs: list[RunData]
    models: list[ModelSummary]
    pei_results: list[PeiResult] = field(default_factory=list)
    pei: PeiMatrix | None = None


@dataclass(frozen=True)
class ReportFiles:
    """The files a report wrote."""

    out_dir: Path
    html: Path
    markdown: Path
    csv: list[Path]
    png: list[Path]


def _embedding_source(run: RunRecord) -> tuple[str | None, str]:
    config = run.config
    model = (config.get("similarity") or {}).get("embedding_model")
    host = (config.get("ollama") or {}).get("host") or run.host
    return (str(model) if model else None), str(host or "")


def collect(
    storage: Storage, runs: Sequence[RunRecord], *, title: str, lexical: bool = False
) -> ReportData:
    """Read everything the report needs for `runs`.

    Args:
        storage: Where the runs live.
        runs: The runs, in the order the report lists them.
        title: The report's heading.
        lexical: Use TF-IDF for the similarity heatmaps even when a run has an
            embedding model configured (no network at all).
    """
    engine = engine_for(storage)
    data: list[RunData] = []
    failed_hosts: dict[tuple[str, str], str] = {}
    for run in runs:
        records = cycle_records(engine, run.run_id)
        notes = [(r.cycle, r.reflection) for r in records]
        similarity = None
        if len(notes) >= 2:
            model, host = (None, "") if lexical else _embedding_source(run)
            if model and (host, model) in failed_hosts:
                # One unreachable host must not cost a timeout for every run of a batch.
                similarity = pairwise(notes)
                similarity = PairwiseSimilarity(
                    similarity.labels,
                    similarity.matrix,
                    similarity.method,
                    failed_hosts[(host, model)],
                )
            else:
                similarity = pairwise(
                    notes, embedding_model=model, host=host, timeout_s=EMBED_TIMEOUT_S
                )
                if model and not similarity.method.startswith("embedding:"):
                    failed_hosts[(host, model)] = similarity.note
        data.append(
            RunData(run, cycle_table(engine, run), run_summary(engine, run), similarity, notes)
        )
    results = stored_results(engine, [r.run_id for r in runs])
    rated = [r for r in runs if any(p.run_id == r.run_id for p in results)]
    return ReportData(
        title=title,
        generated_at=datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        runs=data,
        models=model_summaries([d.summary for d in data]),
        pei_results=results,
        pei=build_matrix(results, rated) if rated else None,
    )


# --------------------------------------------------------------------------- tables


def _fmt(value: Any, digits: int = 1) -> str:
    """A cell as text: ints as ints, floats rounded, None as a dash."""
    if value is None or value == "":
        return "–"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return "–"
        return str(int(value)) if value.is_integer() else f"{value:.{digits}f}"
    return str(value)


def _whole(value: float | None) -> float | int | None:
    """Whole numbers as int (a level of 7, not 7.0), others unchanged."""
    return int(value) if value is not None and float(value).is_integer() else value


def run_rows(data: ReportData) -> list[dict[str, Any]]:
    """Table 1 per run, with the extra totals, as CSV/table rows."""
    rows = []
    for d in data.runs:
        s = d.summary
        rows.append(
            {
                "run_id": s.run_id,
                "model": s.model,
                "batch": s.batch or "",
                "status": s.status,
                "cycles": s.cycles,
                **{key: s.values[key] for key in TABLE1_KEYS},
                **{key: s.extras.get(key) for key in EXTRAS},
            }
        )
    return rows


def model_rows(data: ReportData) -> list[dict[str, Any]]:
    """Table 1 per model (mean and sd over runs) as CSV rows."""
    rows = []
    for m in data.models:
        row: dict[str, Any] = {
            "model": m.model,
            "runs": len(m.runs),
            "run_ids": " ".join(m.runs),
            "cycles_mean": round(m.cycles_mean, 4),
        }
        for key in TABLE1_KEYS:
            sd = m.sd[key]
            row[f"{key}_mean"] = round(m.mean[key], 4)
            row[f"{key}_sd"] = None if sd is None else round(sd, 4)
        rows.append(row)
    return rows


def model_table(data: ReportData) -> tuple[list[str], list[list[str]]]:
    """Table 1 per model in the paper's layout: metrics as rows, models as columns."""
    headers = ["Metric", *(f"{m.model} (n={len(m.runs)})" for m in data.models)]
    body = [
        [label, *(format_mean_sd(m.mean[key], m.sd[key]) for m in data.models)]
        for key, label in TABLE1
    ]
    return headers, body


def run_table(data: ReportData) -> tuple[list[str], list[list[str]]]:
    """Table 1 per run: runs as rows."""
    headers = ["Run", "Model", "Status", "Cycles", *(label for _, label in TABLE1)]
    body = [
        [
            d.summary.run_id,
            d.summary.model,
            d.summary.status,
            str(d.summary.cycles),
            *(_fmt(d.summary.values[key]) for key in TABLE1_KEYS),
        ]
        for d in data.runs
    ]
    return headers, body


def cycle_rows_shown(data: ReportData) -> tuple[list[str], list[list[str]]]:
    """The per-cycle table of every run, with the columns shown in Markdown/HTML."""
    body = [
        [_fmt(row.get(c), 3 if c == "similarity" else 1) for c in MARKDOWN_CYCLE_COLUMNS]
        for d in data.runs
        for row in d.cycles
    ]
    return list(MARKDOWN_CYCLE_COLUMNS), body


def pei_table(matrix: PeiMatrix) -> tuple[list[str], list[list[str]]]:
    """A PEI matrix with a mean column and an evaluator-mean row."""
    headers = ["History \\ evaluator", *matrix.columns, "Mean"]
    body = [
        [label, *(_fmt(v) for v in row), _fmt(mean)]
        for label, row, mean in zip(matrix.rows, matrix.cells, matrix.history_means, strict=True)
    ]
    body.append(["Evaluator mean", *(_fmt(v) for v in matrix.evaluator_means), ""])
    return headers, body


def agreement_lines(agreements: Sequence[Agreement]) -> list[str]:
    """One sentence per agreement statistic."""
    return [describe(a) for a in agreements]


def markdown_table(headers: Sequence[str], body: Sequence[Sequence[str]]) -> str:
    """A GitHub-flavoured Markdown table (pipes and newlines in cells escaped)."""

    def cell(text: str) -> str:
        return str(text).replace("|", "\\|").replace("\r", " ").replace("\n", " ")

    lines = [
        "| " + " | ".join(cell(h) for h in headers) + " |",
        "|" + "|".join("---" for _ in headers) + "|",
    ]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in body]
    return "\n".join(lines)


# ---------------------------------------------------------------------------- plots


def _png(fig: Figure) -> bytes:
    FigureCanvasAgg(fig)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    return buffer.getvalue()


def plot_cycles(data: ReportData) -> bytes:
    """Per-cycle metrics: one panel per metric, one line per run (colour by model)."""
    fig = Figure(figsize=(16, 7.5), layout="constrained")
    axes = fig.subplots(2, 4).flatten()
    models = list(dict.fromkeys(d.run.model for d in data.runs))
    colours = {m: f"C{i % 10}" for i, m in enumerate(models)}
    styles = ["-", "--", ":", "-."]
    seen: dict[str, int] = {}
    for d in data.runs:
        index = seen.get(d.run.model, 0)
        seen[d.run.model] = index + 1
        cycles = [row["cycle"] for row in d.cycles]
        for ax, (key, _) in zip(axes, PLOTTED, strict=True):
            values = [row.get(key) for row in d.cycles]
            ys = [math.nan if v is None else float(v) for v in values]
            ax.plot(
                cycles,
                ys,
                marker="o",
                markersize=3,
                linestyle=styles[index % len(styles)],
                color=colours[d.run.model],
                label=d.run.run_id,
            )
    for ax, (key, label) in zip(axes, PLOTTED, strict=True):
        if key != "similarity":
            ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_title(label, fontsize=10)
        ax.set_xlabel("cycle", fontsize=8)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.tick_params(labelsize=8)
        ax.grid(alpha=0.3)
    if len(data.runs) <= 20:
        axes[0].legend(fontsize=7, loc="best")
    fig.suptitle(f"Per-cycle metrics — {data.title}", fontsize=12)
    return _png(fig)


def _heatmap(
    fig: Figure,
    cells: Sequence[Sequence[float | None]],
    rows: Sequence[str],
    columns: Sequence[str],
    *,
    vmin: float,
    vmax: float,
    digits: int,
    label: str,
) -> None:
    ax = fig.subplots()
    grid = [[math.nan if v is None else float(v) for v in row] for row in cells]
    image = ax.imshow(grid, vmin=vmin, vmax=vmax, cmap="viridis", aspect="auto")
    fig.colorbar(image, ax=ax, label=label)
    ax.set_xticks(range(len(columns)), labels=list(columns), rotation=45, ha="right", fontsize=8)
    ax.set_yticks(range(len(rows)), labels=list(rows), fontsize=8)
    if len(rows) * len(columns) <= 400:
        for i, row in enumerate(grid):
            for j, value in enumerate(row):
                if not math.isnan(value):
                    shade = "black" if value > vmin + 0.6 * (vmax - vmin) else "white"
                    text = str(int(value)) if value.is_integer() else f"{value:.{digits}f}"
                    ax.text(j, i, text, ha="center", va="center", color=shade, fontsize=7)


def plot_similarity(run_id: str, similarity: PairwiseSimilarity) -> bytes:
    """Heatmap of the pairwise cosine similarity of a run's reflections."""
    n = len(similarity.labels)
    size = min(12.0, 3.0 + 0.45 * n)
    fig = Figure(figsize=(size + 1.5, size))
    labels = [str(c) for c in similarity.labels]
    _heatmap(
        fig,
        similarity.matrix,
        labels,
        labels,
        vmin=0.0,
        vmax=1.0,
        digits=2,
        label="cosine similarity",
    )
    ax = fig.axes[0]
    ax.set_xlabel("cycle")
    ax.set_ylabel("cycle")
    ax.set_title(f"Reflection similarity — {run_id} ({similarity.method})", fontsize=10)
    return _png(fig)


def plot_pei(matrix: PeiMatrix) -> bytes:
    """Heatmap of PEI levels, histories x evaluators."""
    fig = Figure(figsize=(3.0 + 1.2 * len(matrix.columns), 2.0 + 0.45 * len(matrix.rows)))
    _heatmap(
        fig,
        matrix.cells,
        matrix.rows,
        matrix.columns,
        vmin=1.0,
        vmax=10.0,
        digits=1,
        label="PEI level",
    )
    ax = fig.axes[0]
    ax.set_xlabel("evaluator")
    ax.set_ylabel("history (run)")
    ax.set_title("PEI ratings", fontsize=10)
    return _png(fig)


# --------------------------------------------------------------------------- writing


def _html_table(headers: Sequence[str], body: Sequence[Sequence[str]], css: str = "") -> str:
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in headers)
    rows = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in body
    )
    klass = f' class="{css}"' if css else ""
    return f"<table{klass}><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"


def _img(name: str, data: bytes, alt: str) -> str:
    encoded = base64.b64encode(data).decode("ascii")
    return (
        f'<figure><img src="data:image/png;base64,{encoded}" alt="{html.escape(alt)}">'
        f"<figcaption>{html.escape(name)}</figcaption></figure>"
    )


_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:2rem auto;
max-width:1200px;padding:0 1rem;color:#1d1d1f;line-height:1.45}
h1{font-size:1.6rem}h2{font-size:1.25rem;margin-top:2rem;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.8rem 0;font-size:.85rem}
th,td{border:1px solid #ccc;padding:.25rem .5rem;text-align:right}
th{background:#f3f3f6}td:first-child,th:first-child{text-align:left}
.wide{display:block;overflow-x:auto}
figure{margin:1rem 0}img{max-width:100%;height:auto;border:1px solid #eee}
figcaption{font-size:.8rem;color:#555}.note{color:#555;font-size:.9rem}
details{margin:.5rem 0}summary{cursor:pointer;font-weight:600}
.reflection{white-space:pre-wrap;background:#fafafa;border-left:3px solid #ccd;
padding:.3rem .6rem;margin:.3rem 0;font-size:.85rem}
"""


def _runs_table(data: ReportData) -> tuple[list[str], list[list[str]]]:
    headers = ["Run", "Model", "Batch", "Status", "Cycles", "Forked from"]
    body = [
        [
            d.run.run_id,
            d.run.model,
            d.run.batch or "",
            d.run.status + (f" ({d.run.reason})" if d.run.reason else ""),
            str(d.summary.cycles),
            f"{d.run.parent_run_id} @ {d.run.fork_cycle}" if d.run.parent_run_id else "",
        ]
        for d in data.runs
    ]
    return headers, body


def render_markdown(data: ReportData, images: Sequence[tuple[str, str]]) -> str:
    """The report as Markdown (tables inline, images linked by file name)."""
    parts = [
        f"# {data.title}",
        f"Generated {data.generated_at} by contreact.",
        "## Runs",
        markdown_table(*_runs_table(data)),
        "## Table 1 by model (mean ± sd over runs)",
        "As in Szeider (2025), Table 1: run totals over all cycles; final memory keys "
        "is the count at the end of the run.",
        markdown_table(*model_table(data)),
        "## Table 1 by run",
        markdown_table(*run_table(data)),
    ]
    if data.pei is not None:
        parts += [
            "## PEI ratings (histories × evaluators)",
            markdown_table(*pei_table(data.pei)),
            *(f"- {line}" for line in agreement_lines(data.pei.agreement())),
        ]
        by_model = data.pei.by_model()
        if len(by_model.rows) < len(data.pei.rows):
            parts += [
                "### PEI by history model (mean over runs)",
                markdown_table(*pei_table(by_model)),
            ]
        unparsed = [r for r in data.pei_results if r.level is None]
        if unparsed:
            parts.append(
                "Answers without a level: "
                + "; ".join(f"{r.run_id} by {r.evaluator}: {r.reason}" for r in unparsed)
            )
    parts += ["## Per-cycle metrics", markdown_table(*cycle_rows_shown(data)), "## Plots"]
    parts += [f"![{alt}]({name})" for name, alt in images]
    return "\n\n".join(parts) + "\n"


def render_html(data: ReportData, images: Sequence[tuple[str, str, bytes]]) -> str:
    """The report as one self-contained HTML page (inline CSS, images as data URIs, no JS)."""
    body = [
        f"<h1>{html.escape(data.title)}</h1>",
        f'<p class="note">Generated {html.escape(data.generated_at)} by contreact.</p>',
        "<h2>Runs</h2>",
        _html_table(*_runs_table(data)),
        "<h2>Table 1 by model (mean ± sd over runs)</h2>",
        '<p class="note">As in Szeider (2025), Table 1: run totals over all cycles; final '
        "memory keys is the count at the end of the run.</p>",
        _html_table(*model_table(data)),
        "<h2>Table 1 by run</h2>",
        _html_table(*run_table(data), css="wide"),
    ]
    if data.pei is not None:
        body += [
            "<h2>PEI ratings (histories × evaluators)</h2>",
            _html_table(*pei_table(data.pei)),
            "<ul>"
            + "".join(
                f"<li>{html.escape(line)}</li>" for line in agreement_lines(data.pei.agreement())
            )
            + "</ul>",
        ]
        by_model = data.pei.by_model()
        if len(by_model.rows) < len(data.pei.rows):
            body += [
                "<h3>PEI by history model (mean over runs)</h3>",
                _html_table(*pei_table(by_model)),
            ]
        answers = [
            [r.run_id, r.evaluator, _fmt(r.level), r.reason, r.answer] for r in data.pei_results
        ]
        body.append(
            "<details><summary>PEI answers</summary>"
            + _html_table(["Run", "Evaluator", "Level", "Why no level", "Answer"], answers)
            + "</details>"
        )
    body.append("<h2>Plots</h2>")
    body += [_img(name, png, alt) for name, alt, png in images]
    body.append("<h2>Per-cycle metrics</h2>")
    body.append(_html_table(*cycle_rows_shown(data), css="wide"))
    body.append("<h2>Reflections</h2>")
    for d in data.runs:
        notes = "".join(
            f"<p><strong>Cycle {cycle}</strong></p>"
            f'<div class="reflection">{html.escape(text) or "(empty)"}</div>'
            for cycle, text in d.reflections
        )
        body.append(
            f"<details><summary>{html.escape(d.run.run_id)}</summary>{notes or '–'}</details>"
        )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(data.title)}</title><style>{_CSS}</style></head>"
        f"<body>{''.join(body)}</body></html>\n"
    )


def write_report(data: ReportData, out_dir: Path) -> ReportFiles:
    """Write CSV, Markdown, PNG and HTML files of `data` into `out_dir` (created)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    csvs: list[Path] = []

    def save_csv(
        name: str, rows: list[dict[str, Any]], columns: Sequence[str] | None = None
    ) -> None:
        path = out_dir / name
        with path.open("w", encoding="utf-8", newline="") as fh:
            write_csv(rows, fh, columns)
        csvs.append(path)

    cycles = [row for d in data.runs for row in d.cycles]
    save_csv("cycles.csv", cycles, columns_of(cycles) or ["run_id", "cycle"])
    save_csv("table1_runs.csv", run_rows(data))
    save_csv("table1_models.csv", model_rows(data))
    if data.pei is not None:
        save_csv(
            "pei_results.csv",
            [
                {
                    "run_id": r.run_id,
                    "evaluator": r.evaluator,
                    "level": r.level,
                    "reason": r.reason,
                    "fork_run_id": r.fork_run_id,
                    "at_cycle": r.at_cycle,
                    "instrument_sha": r.instrument_sha,
                    "answer": r.answer,
                }
                for r in data.pei_results
            ],
        )
        matrix = data.pei
        save_csv(
            "pei_matrix.csv",
            [
                {
                    "history": label,
                    "model": model,
                    **dict(zip(matrix.columns, map(_whole, row), strict=True)),
                }
                for label, model, row in zip(
                    matrix.rows, matrix.row_models, matrix.cells, strict=True
                )
            ],
            ["history", "model", *matrix.columns],
        )

    images: list[tuple[str, str, bytes]] = []
    if any(d.cycles for d in data.runs):
        images.append(("per_cycle_metrics.png", "Per-cycle metrics", plot_cycles(data)))
    for d in data.runs:
        if d.similarity is not None:
            alt = f"Reflection similarity of {d.run.run_id} ({d.similarity.method})"
            images.append(
                (f"similarity_{d.run.run_id}.png", alt, plot_similarity(d.run.run_id, d.similarity))
            )
    if data.pei is not None:
        images.append(("pei_matrix.png", "PEI matrix", plot_pei(data.pei)))
    pngs = []
    for name, _, png in images:
        path = out_dir / name
        path.write_bytes(png)
        pngs.append(path)

    markdown = out_dir / "report.md"
    markdown.write_text(render_markdown(data, [(n, a) for n, a, _ in images]), encoding="utf-8")
    page = out_dir / "report.html"
    page.write_text(render_html(data, images), encoding="utf-8")
    return ReportFiles(out_dir=out_dir, html=page, markdown=markdown, csv=csvs, png=pngs)


def build_report(
    storage: Storage,
    runs: Sequence[RunRecord],
    out_dir: Path,
    *,
    title: str,
    lexical: bool = False,
) -> ReportFiles:
    """Collect and write the report of `runs` into `out_dir`."""
    return write_report(collect(storage, runs, title=title, lexical=lexical), out_dir)
