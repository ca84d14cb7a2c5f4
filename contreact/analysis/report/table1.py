"""Table 1, per run and per model: the paper's six numbers, each model's with its interval.

Per model, each cell is the mean over the model's runs with its 95 % bootstrap interval
(`metrics.model_summaries`, `analysis.intervals`), marked when it rests on fewer than
`intervals.FEW_RUNS` runs; the CSV rows keep the sd, the interval and its standard error
beside each mean.
"""

from __future__ import annotations

from typing import Any

from contreact.analysis.intervals import FEW_RUNS, Interval
from contreact.analysis.metrics import EXTRAS, TABLE1, TABLE1_KEYS, length_notes
from contreact.analysis.report.collect import ReportData


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else f"{value:.1f}"
    return str(value)


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
    return _batch_when_known(rows)


def _batch_when_known(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`rows` without their `batch` column when no run belongs to a batch (never empty)."""
    if any(row["batch"] for row in rows):
        return rows
    return [{k: v for k, v in row.items() if k != "batch"} for row in rows]


def model_rows(data: ReportData) -> list[dict[str, Any]]:
    """Table 1 per model as CSV rows: mean, sd, 95 % interval and bootstrap se per metric."""
    rows = []
    for m in data.models:
        row: dict[str, Any] = {
            "model": m.model,
            "batch": m.batch or "",
            "cycles": m.cycles,
            "runs": len(m.runs),
            "run_ids": " ".join(m.runs),
            "cycles_mean": round(m.cycles_mean, 4),
        }
        for key in TABLE1_KEYS:
            sd = m.sd[key]
            interval = m.intervals.get(key)
            row[f"{key}_mean"] = round(m.mean[key], 4)
            row[f"{key}_sd"] = None if sd is None else round(sd, 4)
            row[f"{key}_ci_low"] = _rounded(interval.low if interval else None)
            row[f"{key}_ci_high"] = _rounded(interval.high if interval else None)
            row[f"{key}_se"] = _rounded(interval.standard_error if interval else None)
        # The bootstrap that made the intervals (a metric whose runs all agree has none).
        methods = [i.method for i in m.intervals.values()]
        row["interval_method"] = next((x for x in methods if "bootstrap" in x), methods[0])
        rows.append(row)
    return _batch_when_known(rows)


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


FEW_MARK = "†"
"""Beside an interval that rests on fewer than `intervals.FEW_RUNS` runs."""


def mean_interval_text(mean: float, interval: Interval | None, digits: int, scale: float) -> str:
    """`12.3 [10.0, 15.0]`, with `FEW_MARK` when the interval rests on few runs."""
    text = f"{mean / scale:.{digits}f}"
    if interval is None or interval.low is None:
        return text
    return f"{text} {interval.text(digits, scale)}" + (FEW_MARK if interval.few else "")


def model_table(data: ReportData) -> tuple[list[str], list[list[str]]]:
    """Table 1 per model in the paper's layout: metrics as rows, models as columns.

    Each cell is the mean over runs with its 95 % interval. Character counts are in
    thousands (k-chars), as the paper reports them; the CSV files keep the exact counts.
    Compared batches, and runs of different lengths, have columns of their own
    (`metrics.model_summaries`).
    """
    headers = ["Metric", *(f"{m.label or m.model} (n={len(m.runs)})" for m in data.models)]
    body = []
    for key, label in TABLE1:
        chars = key.endswith("_chars")
        cells = [
            mean_interval_text(
                m.mean[key], m.intervals.get(key), 2 if chars else 1, 1000.0 if chars else 1.0
            )
            for m in data.models
        ]
        body.append([f"{label} (k)" if chars else label, *cells])
    return headers, body


def model_notes(data: ReportData) -> list[str]:
    """What a reader of Table 1 by model must know: which batches, which lengths apart."""
    batches = list(dict.fromkeys(m.batch for m in data.models if m.batch))
    notes = []
    if len(batches) > 1:
        notes.append(
            "Batches side by side: " + ", ".join(batches) + "; each column is one batch's runs."
        )
    few = sorted({len(m.runs) for m in data.models if len(m.runs) < FEW_RUNS})
    if any(i.few and i.low is not None for m in data.models for i in m.intervals.values()):
        notes.append(
            f"{FEW_MARK} Fewer than {FEW_RUNS} runs (n = {', '.join(map(str, few))}): a "
            "percentile bootstrap over so few runs is likely too narrow; read it as the "
            "spread of these runs, not as a 95 % guarantee."
        )
    return notes + length_notes(data.models)


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
