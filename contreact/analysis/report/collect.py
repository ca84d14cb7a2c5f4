"""Collect: read everything a report shows of some runs, once, into plain data.

The tables, plots and renderers below only format `ReportData`; reading the database (and,
for runs with an embedding model, asking Ollama for embeddings) happens here alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from contreact.analysis.format_health import FormatHealth, format_health
from contreact.analysis.metrics import (
    ModelSummary,
    RunSummary,
    cycle_table,
    model_summaries,
    run_summary,
)
from contreact.analysis.pei.matrix import PeiMatrix, build_matrix
from contreact.analysis.pei.results import PeiResult, stored_results
from contreact.analysis.report.methods import Methods, collect_methods, replicate_of
from contreact.analysis.similarity import PairwiseSimilarity, pairwise
from contreact.checkpoints.cycles import cycle_records
from contreact.checkpoints.engines import engine_for
from contreact.checkpoints.registry import RunRecord
from contreact.checkpoints.storage import Storage

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
    last_cycles: dict[str, int] = field(default_factory=dict)
    """Each run's last finished cycle (a PEI rating made before it is stale)."""
    methods: Methods | None = None
    health: list[FormatHealth] = field(default_factory=list)
    """Per model: steps, calls parsed, unreadable markup, truncations, echoes, ..."""


def in_report_order(runs: Sequence[RunRecord]) -> list[RunRecord]:
    """Runs by batch, then model (each in order of first appearance), then replicate."""
    batch = {b: i for i, b in reversed(list(enumerate(r.batch for r in runs)))}
    first = {m: i for i, m in reversed(list(enumerate(r.model for r in runs)))}
    return sorted(runs, key=lambda r: (batch[r.batch], first[r.model], replicate_of(r.run_id) or 0))


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
        runs: The runs; the report lists them by model, then replicate.
        title: The report's heading.
        lexical: Use TF-IDF for the similarity heatmaps even when a run has an
            embedding model configured (no network at all).
    """
    engine = engine_for(storage)
    runs = in_report_order(runs)
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
    last = {d.run.run_id: d.reflections[-1][0] for d in data if d.reflections}
    return ReportData(
        title=title,
        generated_at=datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        runs=data,
        models=model_summaries([d.summary for d in data]),
        pei_results=results,
        pei=build_matrix(results, rated, last_cycles=last) if rated else None,
        last_cycles=last,
        methods=collect_methods(engine, runs),
        health=format_health(engine, runs),
    )
