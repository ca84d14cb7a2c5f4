"""The results page: Table 1 by model, the PEI matrices, and the report's files.

The figures are the report's own (`analysis.metrics`, `analysis.pei`, `analysis.report`):
the page shows them for a batch or for every run, and writes `contreact report`'s files
into the storage's folder (`reports/NAME/`) on request, to be opened from the page. Those
files are served from that folder alone, each name checked, and the report's HTML page in a
sandbox: it is a document of its own, never part of the console.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import FileResponse, RedirectResponse, Response
from starlette.routing import Route

from contreact.analysis.metrics import TABLE1, format_mean_sd, model_summaries, run_summary
from contreact.analysis.pei.matrix import build_matrix
from contreact.analysis.pei.results import stored_results
from contreact.analysis.report import build_report
from contreact.analysis.report.tables import pei_table
from contreact.analysis.runs import in_study_order
from contreact.checkpoints.cycles import last_cycle
from contreact.checkpoints.registry import RunRecord, list_runs
from contreact.checkpoints.storage import Storage
from contreact.console.context import Console, console_of

SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")
"""A report folder's or file's name as the console serves it (no path, nothing hidden)."""
KINDS = {".html": "text/html", ".md": "text/plain", ".csv": "text/csv", ".png": "image/png"}
ALL_RUNS = "all-runs"


def reports_dir(storage: Storage) -> Path:
    """Where the console writes reports: `reports/` in the storage's folder."""
    return storage.data_dir / "reports"


def folder_name(batch: str | None) -> str:
    """The report folder of a batch (or of every run)."""
    if batch is None:
        return ALL_RUNS
    slug = re.sub(r"[^A-Za-z0-9._-]", "-", batch).strip(".-") or "batch"
    return slug[:200]


def _runs(console: Console, batch: str | None) -> list[RunRecord]:
    return [r for r in list_runs(console.engine) if batch is None or r.batch == batch]


def _table1(console: Console, chosen: list[RunRecord]) -> dict[str, Any]:
    summaries = model_summaries([run_summary(console.engine, r) for r in chosen])
    return {
        "headers": ["model", "runs", "cycles", *(label for _, label in TABLE1)],
        "body": [
            [
                m.label or m.model,
                str(len(m.runs)),
                f"{m.cycles_mean:g}",
                *(format_mean_sd(m.mean[key], m.sd[key]) for key, _ in TABLE1),
            ]
            for m in summaries
        ],
    }


def _pei(console: Console, chosen: list[RunRecord]) -> list[dict[str, Any]]:
    results = stored_results(console.engine, [r.run_id for r in chosen])
    rated = [r for r in in_study_order(chosen) if any(p.run_id == r.run_id for p in results)]
    if not rated:
        return []
    last = {r.run_id: last_cycle(console.engine, r.run_id) or 0 for r in rated}
    matrix = build_matrix(results, rated, last_cycles=last)
    tables = []
    for title, shown in (("PEI by run", matrix), ("PEI by model", matrix.by_model())):
        headers, body = pei_table(shown)
        tables.append({"title": title, "headers": headers, "body": body, "notes": shown.notes()})
    return tables


def results(request: Request) -> Response:
    """The results of a batch (`?batch=NAME`) or of every run."""
    console = console_of(request)
    batch = request.query_params.get("batch") or None
    chosen = _runs(console, batch)
    batches = sorted({r.batch for r in list_runs(console.engine) if r.batch})
    folder = reports_dir(console.storage) / folder_name(batch)
    files = sorted(p.name for p in folder.iterdir() if p.suffix in KINDS) if folder.is_dir() else []
    return console.page(
        request,
        "results.html",
        batch=batch,
        batches=batches,
        runs=chosen,
        table1=_table1(console, chosen) if chosen else None,
        pei=_pei(console, chosen) if chosen else [],
        folder=folder_name(batch),
        files=files,
        shown_folder=str(folder),
    )


async def write(request: Request) -> Response:
    """Write the report's files of a batch (form: `batch`) or of every run."""
    from starlette.concurrency import run_in_threadpool

    console = console_of(request)
    form = await request.form()
    batch = str(form.get("batch") or "") or None
    chosen = _runs(console, batch)
    if chosen:
        out = reports_dir(console.storage) / folder_name(batch)
        title = f"Batch {batch}" if batch else "Every run"
        # Lexical similarity only: the console asks no model anything.
        await run_in_threadpool(
            build_report, console.storage, chosen, out, title=title, lexical=True
        )
    target = "/results" + (f"?{urlencode({'batch': batch})}" if batch else "")
    return RedirectResponse(target, status_code=303)


def report_file(request: Request) -> Response:
    """One file of a written report, from the storage's `reports/` folder only."""
    console = console_of(request)
    folder, name = str(request.path_params["folder"]), str(request.path_params["name"])
    base = reports_dir(console.storage).resolve()
    path = (base / folder / name).resolve()
    kind = KINDS.get(path.suffix)
    allowed = SAFE_NAME.match(folder) and SAFE_NAME.match(name) and path.parent.parent == base
    if not allowed or kind is None or not path.is_file():
        return Response("no such report file", status_code=404, media_type="text/plain")
    return FileResponse(
        path, media_type=kind + ("; charset=utf-8" if kind.startswith("text") else "")
    )


ROUTES = [
    Route("/results", results),
    Route("/results/report", write, methods=["POST"]),
    Route("/reports/{folder}/{name}", report_file),
]
POSTS = ["/results/report"]
