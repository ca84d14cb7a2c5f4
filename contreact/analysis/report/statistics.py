"""The report's uncertainty: comparison tables, agreement with intervals, and how it was made.

Rows for the CSVs and header/body text for Markdown, HTML and LaTeX, of the comparisons
(`analysis.comparisons`), the PEI agreement and test-retest statistics, and the
per-cycle bands; and the sentences of the Methods section that say which statistics made
every interval and p-value, with which seed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from contreact.analysis.agreement import ALPHA_RESAMPLES, Agreement
from contreact.analysis.comparisons import Comparison
from contreact.analysis.figures.trajectories import PLOTTED
from contreact.analysis.intervals import (
    BAND_RESAMPLES,
    CONFIDENCE,
    FEW_RUNS,
    RESAMPLES,
    SEED,
    mean_bands,
    shown,
)
from contreact.analysis.report.collect import ReportData


def _p(value: float | None) -> str:
    return "–" if value is None else f"{value:.3g}"


def _number(value: float | None) -> str:
    return "–" if value is None else shown(value, 1)


def difference_rows(comparison: Comparison) -> list[dict[str, Any]]:
    """A comparison as CSV rows (exact values)."""
    return [
        {
            "metric": d.metric,
            "a": d.a,
            "b": d.b,
            "scope": d.scope,
            "n_a": d.n_a,
            "n_b": d.n_b,
            "pairs": d.pairs,
            "mean_a": d.mean_a,
            "mean_b": d.mean_b,
            "difference": d.interval.estimate,
            "ci_low": d.interval.low,
            "ci_high": d.interval.high,
            "interval_method": d.interval.method,
            "p_value": d.test.p_value,
            "p_exact": d.test.exact,
            "smallest_p": d.test.smallest_p,
            "q_value": d.q_value,
            "effect": d.effect,
            "effect_name": d.effect_name,
        }
        for d in comparison.rows
    ]


def difference_table(comparison: Comparison) -> tuple[list[str], list[list[str]]]:
    """A comparison for reading: metric, runs, both means, B − A [95 % interval], p, q, effect."""
    headers = ["Metric", "Runs", "n", "A", "B", "B − A [95 % interval]", "p", "q", "Effect"]
    if comparison.kind == "batches" and comparison.rows:
        first = comparison.rows[0]
        headers[3:5] = [first.a, first.b]
    body = []
    for d in comparison.rows:
        interval = d.interval
        mark = "†" if interval.low is not None and interval.few else ""
        n = f"{d.pairs} pairs" if d.pairs else f"{d.n_a} vs {d.n_b}"
        if comparison.kind == "models":
            compared = f"{d.b} − {d.a}" + (f" ({d.scope})" if d.scope else "")
        else:
            compared = d.scope
        body.append(
            [
                d.label,
                compared,
                n,
                _number(d.mean_a),
                _number(d.mean_b),
                f"{_number(interval.estimate)} {interval.text(1)}{mark}".strip(),
                _p(d.test.p_value) + ("" if d.test.exact else "*"),
                _p(d.q_value),
                "–" if d.effect is None else f"{d.effect:+.2f}",
            ]
        )
    return headers, body


def comparison_notes(comparison: Comparison) -> list[str]:
    """The notes under a comparison table: its own, then how to read the columns."""
    effect = next((d.effect_name for d in comparison.rows), "")
    return [
        *comparison.notes,
        "An exact test has a floor: on n pairs p cannot be below 2/2^n (0.25 for 3 pairs), on "
        "a runs against b, below 2/C(a+b, a) (0.1 for 3 against 3); the CSV's smallest_p "
        "gives each row's.",
        f"p: two-sided permutation test (exact unless marked *, then {RESAMPLES} random "
        "permutations); q: Benjamini-Hochberg over this table's rows; effect: "
        f"{effect} (−1 to 1); † fewer than {FEW_RUNS} runs or pairs behind the interval.",
    ]


AGREEMENT_COLUMNS = (
    "scope",
    "statistic",
    "value",
    "ci_low",
    "ci_high",
    "interval_method",
    "histories",
    "raters",
    "undefined_because",
)
"""The columns of `pei_agreement.csv` (and, after `evaluator` and `repeats`, of
`pei_test_retest.csv`)."""


def agreement_rows(
    agreements: Sequence[Agreement], scope: str = "evaluators"
) -> list[dict[str, Any]]:
    """Agreement statistics as CSV rows."""
    return [
        {
            "scope": scope,
            "statistic": a.statistic,
            "value": a.value,
            "ci_low": a.low,
            "ci_high": a.high,
            "interval_method": a.method,
            "histories": a.subjects,
            "raters": a.raters,
            "undefined_because": a.reason,
        }
        for a in agreements
    ]


def retest_rows(data: ReportData) -> list[dict[str, Any]]:
    """Each evaluator's test-retest statistics as CSV rows."""
    rows = []
    for retest in data.retests:
        for row in agreement_rows([retest.icc, retest.alpha], retest.evaluator):
            rows.append({"evaluator": retest.evaluator, "repeats": retest.repeats, **row})
    return rows


def trajectory_rows(data: ReportData) -> list[dict[str, Any]]:
    """Per batch, model, metric and cycle: the mean over runs and its 95 % band."""
    rows: list[dict[str, Any]] = []
    groups: dict[tuple[str | None, str], list[list[dict[str, Any]]]] = {}
    for d in data.runs:
        groups.setdefault((d.run.batch, d.run.model), []).append(d.cycles)
    for (batch, model), runs in groups.items():
        cycles = sorted({int(row["cycle"]) for run in runs for row in run})
        index = {c: i for i, c in enumerate(cycles)}
        for key, _ in PLOTTED:
            grid = np.full((len(runs), len(cycles)), np.nan)
            for r, run in enumerate(runs):
                for row in run:
                    if row.get(key) is not None:
                        grid[r, index[int(row["cycle"])]] = float(row[key])
            mean, low, high = mean_bands(grid, seed=data.seed)
            present = (~np.isnan(grid)).sum(axis=0)
            for i, cycle in enumerate(cycles):
                rows.append(
                    {
                        "batch": batch or "",
                        "model": model,
                        "metric": key,
                        "cycle": cycle,
                        "runs": int(present[i]),
                        "mean": None if np.isnan(mean[i]) else float(mean[i]),
                        "ci_low": None if np.isnan(low[i]) else float(low[i]),
                        "ci_high": None if np.isnan(high[i]) else float(high[i]),
                    }
                )
    return rows


def statistics_lines(data: ReportData) -> list[str]:
    """How every interval, p-value and agreement figure of the report was made."""
    few = sorted({len(m.runs) for m in data.models if len(m.runs) < FEW_RUNS})
    level = f"{CONFIDENCE:.0%}".replace("%", " %")
    lines = [
        f"Intervals are {level}, made with scipy.stats.bootstrap over runs: a run is the "
        "unit resampled, so the cycles of a run stay together (a clustered bootstrap); "
        f"{RESAMPLES} resamples, seed {data.seed}. With {FEW_RUNS} runs or more the "
        f"interval is BCa; with fewer it is the percentile interval, marked †, since BCa's "
        "corrections rest on normal quantiles so few values cannot support. No interval of "
        "Table 1 or of a comparison, and no test, uses a normal approximation.",
        f"Per-cycle bands: the same bootstrap at each cycle, {BAND_RESAMPLES} resamples.",
        "Comparisons: the difference of means (B − A) with a bootstrap interval (paired "
        "batches: resampling pairs within each model), a two-sided permutation test "
        f"(scipy.stats.permutation_test; exact when there are at most {RESAMPLES} "
        f"arrangements, else {RESAMPLES} random ones, seed {data.seed}), the "
        "Benjamini-Hochberg q over each table, and a rank-based effect size (Cliff's delta "
        "unpaired, the matched-pairs rank-biserial r paired).",
    ]
    if few:
        lines.append(
            f"Some models have fewer than {FEW_RUNS} runs (n = {', '.join(map(str, few))}): "
            "their intervals describe these runs and are likely too narrow, and an exact "
            "test can reach only a few p-values (its smallest is given)."
        )
    if data.pei is not None:
        lines.append(
            "PEI agreement: ICC(A,1) with McGraw & Wong's F-based interval; Kendall's W; "
            "Krippendorff's alpha (interval level, the krippendorff package) with a "
            f"percentile bootstrap over histories ({ALPHA_RESAMPLES} resamples, seed "
            f"{SEED}); self vs cross with a bootstrap interval over histories and an "
            "exact sign-flip test."
        )
    return lines
