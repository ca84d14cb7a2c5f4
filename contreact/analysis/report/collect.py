"""Collect: read everything a report shows of some runs, once, into plain data.

The tables, plots and renderers below only format `ReportData`; reading the database (and,
for runs with an embedding model, asking Ollama for embeddings) happens here alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

from contreact.analysis.agreement import Agreement
from contreact.analysis.comparisons import Comparison, compare_batches, compare_models
from contreact.analysis.format_health import FormatHealth, format_health
from contreact.analysis.intervals import SEED
from contreact.analysis.metrics import (
    ModelSummary,
    RunSummary,
    cycle_table,
    model_summaries,
    run_summary,
)
from contreact.analysis.pei.matrix import PeiMatrix, build_matrix
from contreact.analysis.pei.results import PeiResult, stored_results
from contreact.analysis.pei.retest import Retest, self_consistency
from contreact.analysis.pei.self_rating import SelfCross, self_vs_cross
from contreact.analysis.report.methods import Methods, collect_methods
from contreact.analysis.runs import in_study_order
from contreact.analysis.similarity import PairwiseSimilarity, pairwise
from contreact.checkpoints.cycles import cycle_records
from contreact.checkpoints.engines import engine_for
from contreact.checkpoints.registry import RunRecord
from contreact.checkpoints.storage import Storage

EMBED_TIMEOUT_S = 10.0

T = TypeVar("T")


@dataclass(frozen=True)
class RunData:
    """What the report shows of one run."""

    run: RunRecord
    cycles: list[dict[str, Any]]
    summary: RunSummary
    similarity: PairwiseSimilarity | None
    reflections: list[tuple[int, str]] = field(default_factory=list)
    """`(cycle, reflection)` of every finished cycle (in the report's cycle range)."""
    similarity_of: int = 0
    """How many cycles the heatmap's reflections were evenly sampled from (0: all shown)."""


@dataclass(frozen=True)
class ReportData:
    """Everything a report is rendered from."""

    title: str
    generated_at: str
    runs: list[RunData]
    models: list[ModelSummary]
    pei_results: list[PeiResult] = field(default_factory=list)
    pei: PeiMatrix | None = None
    last_cycles: dict[str, int] = field(default_factory=dict)
    """Each run's last finished cycle (a PEI rating made before it is stale)."""
    methods: Methods | None = None
    health: list[FormatHealth] = field(default_factory=list)
    """Per model: steps, calls parsed, unreadable markup, truncations, echoes, ..."""
    seed: int = SEED
    """The seed of every bootstrap and estimated permutation p in the report."""
    batch_comparisons: list[Comparison] = field(default_factory=list)
    """Each batch after the first against the first (`report --batch A --batch B`)."""
    model_comparison: Comparison | None = None
    """Every pair of models within each batch (None: fewer than two models)."""
    retests: list[Retest] = field(default_factory=list)
    """Each evaluator's test-retest consistency (`pei --repeat K`)."""
    agreement: list[Agreement] = field(default_factory=list)
    """The evaluators' agreement over `pei` (empty without ratings)."""
    self_cross: list[SelfCross] = field(default_factory=list)
    """Each model's self vs cross figure over `pei`."""

    @property
    def model_order(self) -> list[str]:
        """The models in report order: one colour each, in every figure."""
        return list(dict.fromkeys(d.run.model for d in self.runs))


def within(cycle: int, span: tuple[int, int] | None) -> bool:
    """Whether `cycle` is in the inclusive `span` (None: every cycle is)."""
    return span is None or span[0] <= cycle <= span[1]


def _embedding_source(run: RunRecord) -> tuple[str | None, str]:
    config = run.config
    model = (config.get("similarity") or {}).get("embedding_model")
    host = (config.get("ollama") or {}).get("host") or run.host
    return (str(model) if model else None), str(host or "")


HEATMAP_CYCLES = 200
"""The most reflections a similarity heatmap compares: a longer run (or cycle range) is
sampled evenly, first and last cycle included. 200 x 200 cells still show a cell per
pixel or two; 10,000 x 10,000 took minutes and gigabytes and showed no more."""


def evenly(items: Sequence[T], most: int) -> list[T]:
    """At most `most` of `items`, evenly spaced, the first and the last among them."""
    if len(items) <= most:
        return list(items)
    step = (len(items) - 1) / (most - 1)
    return [items[round(i * step)] for i in range(most)]


def collect(
    storage: Storage,
    runs: Sequence[RunRecord],
    *,
    title: str,
    lexical: bool = False,
    cycles: tuple[int, int] | None = None,
    seed: int = SEED,
) -> ReportData:
    """Read everything the report needs for `runs`.

    Args:
        storage: Where the runs live.
        runs: The runs; the report lists them by model, then replicate.
        title: The report's heading.
        lexical: Use TF-IDF for the similarity heatmaps even when a run has an
            embedding model configured (no network at all).
        cycles: Only these cycles (first, last; inclusive) in the per-cycle table, plots
            and heatmaps: a zoom into a long run. Table 1 sums the whole run.
        seed: The seed of the bootstraps and estimated permutation p-values.
    """
    engine = engine_for(storage)
    runs = in_study_order(runs)
    data: list[RunData] = []
    failed_hosts: dict[tuple[str, str], str] = {}
    for run in runs:
        records = cycle_records(engine, run.run_id)
        notes = [(r.cycle, r.reflection) for r in records if within(r.cycle, cycles)]
        compared = evenly(notes, HEATMAP_CYCLES)
        similarity = None
        if len(compared) >= 2:
            model, host = (None, "") if lexical else _embedding_source(run)
            if model and (host, model) in failed_hosts:
                # One unreachable host must not cost a timeout for every run of a batch.
                similarity = pairwise(compared)
                similarity = PairwiseSimilarity(
                    similarity.labels,
                    similarity.matrix,
                    similarity.method,
                    failed_hosts[(host, model)],
                )
            else:
                similarity = pairwise(
                    compared, embedding_model=model, host=host, timeout_s=EMBED_TIMEOUT_S
                )
                if model and not similarity.method.startswith("embedding:"):
                    failed_hosts[(host, model)] = similarity.note
        table = [row for row in cycle_table(engine, run) if within(row["cycle"], cycles)]
        sampled = len(notes) if len(compared) < len(notes) else 0
        data.append(RunData(run, table, run_summary(engine, run), similarity, notes, sampled))
    every = stored_results(engine, [r.run_id for r in runs], repeats=True)
    results = [r for r in every if r.repeat == 1]
    rated = [r for r in runs if any(p.run_id == r.run_id for p in results)]
    last = {d.run.run_id: d.reflections[-1][0] for d in data if d.reflections}
    summaries = [d.summary for d in data]
    matrix = build_matrix(results, rated, last_cycles=last) if rated else None
    batches = list(dict.fromkeys(r.batch for r in runs))
    models = list(dict.fromkeys(r.model for r in runs))
    return ReportData(
        title=title,
        generated_at=datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        runs=data,
        models=model_summaries(summaries, seed=seed),
        pei_results=results,
        pei=matrix,
        last_cycles=last,
        methods=collect_methods(engine, runs),
        health=format_health(engine, runs),
        seed=seed,
        batch_comparisons=[
            compare_batches(summaries, str(batches[0]), str(other), seed=seed)
            for other in batches[1:]
            if batches[0] is not None and other is not None
        ],
        model_comparison=compare_models(summaries, seed=seed) if len(models) > 1 else None,
        retests=self_consistency(every, last),
        agreement=matrix.agreement() if matrix is not None else [],
        self_cross=self_vs_cross(matrix) if matrix is not None else [],
    )
