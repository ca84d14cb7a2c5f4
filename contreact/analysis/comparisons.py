"""Comparisons of Table 1: batch against batch (an ablation) and model against model.

Each row is one metric's difference (B − A) with its 95 % interval, a permutation p
(exact whenever the arrangements can be enumerated), an effect size and a
Benjamini-Hochberg q over the table's rows (`intervals` has the statistics).

Batch against batch is paired wherever it can be: a model run in both batches is compared
with itself, replicate N of one batch with replicate N of the other (the same seed, when
the batches are seeded alike), so what differs between the two runs of a pair is what
differs between the batches. The overall row is the mean over those models of each
model's mean paired difference; a row per model follows it. Models run in only one of
the batches are left out of the paired rows, and said so; two batches with no model in
common are compared unpaired, run against run, and the note says the models differ too.

Model against model, within each batch, is unpaired: two models' runs share a seed, not
a history. Table 1 numbers are run totals, so runs of one length only are compared (the
length most runs have); others are left out with a note.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import combinations
from typing import Any, Literal

from contreact.analysis.intervals import (
    SEED,
    Interval,
    PermutationTest,
    cliffs_delta,
    fdr,
    independent_interval,
    independent_test,
    paired_interval,
    paired_test,
    rank_biserial,
)
from contreact.analysis.metrics import TABLE1, TABLE1_KEYS, RunSummary
from contreact.analysis.records import records
from contreact.analysis.runs import replicate_of

PAIRED_EFFECT = "rank-biserial r"
UNPAIRED_EFFECT = "Cliff's delta"


@dataclass(frozen=True)
class Difference:
    """One metric compared between two sides: B − A."""

    metric: str
    """A Table 1 key."""
    label: str
    """The metric as Table 1 names it."""
    a: str
    b: str
    scope: str
    """Which runs: `all models`, one model (paired rows), or the batch (model rows)."""
    n_a: int
    n_b: int
    pairs: int
    """Pairs of runs compared (0: unpaired)."""
    mean_a: float
    mean_b: float
    interval: Interval
    """The difference (its `estimate`) and its 95 % interval."""
    test: PermutationTest
    effect: float | None
    effect_name: str
    q_value: float | None = None
    """The Benjamini-Hochberg adjusted p over the rows of its table."""
    note: str = ""


@dataclass(frozen=True)
class Comparison:
    """A table of differences and what a reader must know about it."""

    title: str
    kind: Literal["batches", "models"]
    rows: list[Difference]
    notes: list[str]


def summaries_of(runs: Any) -> list[RunSummary]:
    """Runs as this module compares them, from `contreact.load(...).runs` or its rows."""
    return [
        RunSummary(
            run_id=str(row["run_id"]),
            model=str(row["model"]),
            batch=None if row.get("batch") is None else str(row["batch"]),
            status=str(row.get("status", "")),
            cycles=int(row["cycles"]),
            values={key: row[key] for key in TABLE1_KEYS},
        )
        for row in records(runs)
    ]


def _one_length(runs: Sequence[RunSummary]) -> tuple[list[RunSummary], list[str]]:
    """The runs of the length most of them have, and a note naming any left out."""
    if not runs:
        return [], []
    lengths = Counter(r.cycles for r in runs)
    length = max(lengths, key=lambda n: (lengths[n], n))
    kept = [r for r in runs if r.cycles == length]
    left = [r.run_id for r in runs if r.cycles != length]
    note = (
        [f"Compared at {length} cycles; runs of other lengths left out: {', '.join(left)}."]
        if left
        else []
    )
    return kept, note


def _by_replicate(runs: Sequence[RunSummary]) -> dict[int, RunSummary]:
    return {replicate_of(r.run_id) or i: r for i, r in enumerate(runs, start=1)}


def _with_q(rows: list[Difference]) -> list[Difference]:
    qs = fdr([r.test.p_value for r in rows])
    return [replace(r, q_value=q) for r, q in zip(rows, qs, strict=True)]


def _paired_rows(
    key: str,
    label: str,
    a: str,
    b: str,
    pairs: dict[str, list[tuple[RunSummary, RunSummary]]],
    seed: int,
) -> list[Difference]:
    """The overall paired row of one metric, then one row per model."""
    differences = {
        model: [float(y.values[key]) - float(x.values[key]) for x, y in matched]
        for model, matched in pairs.items()
    }

    def side(model_pairs: dict[str, list[tuple[RunSummary, RunSummary]]], i: int) -> float:
        means = [
            sum(float(p[i].values[key]) for p in matched) / len(matched)
            for matched in model_pairs.values()
        ]
        return sum(means) / len(means)

    total = sum(len(m) for m in pairs.values())
    rows = [
        Difference(
            key, label, a, b, "all models", total, total, total,
            side(pairs, 0), side(pairs, 1),
            paired_interval(list(differences.values()), seed=seed),
            paired_test(list(differences.values()), seed=seed),
            rank_biserial([d for ds in differences.values() for d in ds]),
            PAIRED_EFFECT,
        )
    ]  # fmt: skip
    if len(pairs) > 1:
        for model, matched in pairs.items():
            d = differences[model]
            rows.append(
                Difference(
                    key, label, a, b, model, len(d), len(d), len(d),
                    side({model: matched}, 0), side({model: matched}, 1),
                    paired_interval([d], seed=seed), paired_test([d], seed=seed),
                    rank_biserial(d), PAIRED_EFFECT,
                )
            )  # fmt: skip
    return rows


def _unpaired_row(
    key: str,
    label: str,
    a: str,
    b: str,
    scope: str,
    xs: Sequence[RunSummary],
    ys: Sequence[RunSummary],
    seed: int,
) -> Difference:
    x = [float(r.values[key]) for r in xs]
    y = [float(r.values[key]) for r in ys]
    return Difference(
        key, label, a, b, scope, len(x), len(y), 0,
        sum(x) / len(x), sum(y) / len(y),
        independent_interval(x, y, seed=seed), independent_test(x, y, seed=seed),
        cliffs_delta(x, y), UNPAIRED_EFFECT,
    )  # fmt: skip


def compare_batches(runs: Sequence[RunSummary], a: str, b: str, *, seed: int = SEED) -> Comparison:
    """Batch `b` against batch `a`, paired by model and replicate where both have the model."""
    kept, notes = _one_length([r for r in runs if r.batch in (a, b)])
    side_a = [r for r in kept if r.batch == a]
    side_b = [r for r in kept if r.batch == b]
    models_a = list(dict.fromkeys(r.model for r in side_a))
    models_b = list(dict.fromkeys(r.model for r in side_b))
    common = [m for m in models_a if m in models_b]
    rows: list[Difference] = []
    title = f"Batch {b} − batch {a}"
    if not side_a or not side_b:
        return Comparison(
            title, "batches", [], [*notes, "One of the batches has no run to compare."]
        )
    if common:
        pairs: dict[str, list[tuple[RunSummary, RunSummary]]] = {}
        for model in common:
            xs = _by_replicate([r for r in side_a if r.model == model])
            ys = _by_replicate([r for r in side_b if r.model == model])
            matched = [(xs[k], ys[k]) for k in sorted(xs) if k in ys]
            if matched:
                pairs[model] = matched
        for key, label in TABLE1:
            rows += _paired_rows(key, label, a, b, pairs, seed)
        only = [m for m in models_a if m not in common] + [m for m in models_b if m not in common]
        notes.append(
            "Paired: each model with itself, replicate N of one batch with replicate N of "
            "the other; the first row of a metric is the mean over models of each model's "
            "mean difference."
        )
        if only:
            notes.append(f"Left out (run in one batch only): {', '.join(only)}.")
    else:
        for key, label in TABLE1:
            rows.append(_unpaired_row(key, label, a, b, "all runs", side_a, side_b, seed))
        notes.append(
            "No model was run in both batches: compared unpaired, run against run, so the "
            "difference is the models' as much as the batches'."
        )
    return Comparison(title, "batches", _with_q(rows), notes)


def compare_models(runs: Sequence[RunSummary], *, seed: int = SEED) -> Comparison:
    """Every pair of models, within each batch: unpaired differences of Table 1."""
    rows: list[Difference] = []
    notes: list[str] = []
    batches = list(dict.fromkeys(r.batch for r in runs))
    for batch in batches:
        kept, left = _one_length([r for r in runs if r.batch == batch])
        notes += left
        models = list(dict.fromkeys(r.model for r in kept))
        for first, second in combinations(models, 2):
            xs = [r for r in kept if r.model == first]
            ys = [r for r in kept if r.model == second]
            for key, label in TABLE1:
                rows.append(_unpaired_row(key, label, first, second, batch or "", xs, ys, seed))
    notes.append(
        "Unpaired: the runs of two models, within one batch; B − A is the second model "
        "named minus the first."
    )
    return Comparison("Model B − model A", "models", _with_q(rows), notes)
