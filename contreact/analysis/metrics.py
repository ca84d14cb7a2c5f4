"""Per-cycle metrics and the paper's Table 1, per run and per model, from stored cycles.

Szeider (2025), Table 1, compares models by six numbers per run: memory tool operations,
messages to the operator, final memory keys, reflection characters, response characters
and characters written to memory, averaged over replicate runs. The engine already counts
these per cycle (the `metrics` of each CYCLE_END, stored with the cycle), so this module
only sums a run's cycles (the final key count is the last cycle's) and averages runs of
one model. Reading the cycle rows rather than re-deriving the counts from raw events
keeps one definition of each metric: the one the engine wrote down while the run ran.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine

from contreact.analysis.intervals import SEED, Interval, mean_interval
from contreact.analysis.runs import events_of_type
from contreact.checkpoints.cycles import CycleRecord, cycle_records
from contreact.checkpoints.event_schema import LlmInvocation
from contreact.checkpoints.registry import RunRecord
from contreact.ollama.server_numbers import number_or_zero
from contreact.tools.registry import MEMORY_TOOLS, OPERATOR_TOOL

TABLE1: tuple[tuple[str, str], ...] = (
    ("memory_tool_ops", "Memory tool ops"),
    ("messages_to_operator", "Messages to operator"),
    ("final_memory_keys", "Final memory keys"),
    ("reflection_chars", "Reflection chars"),
    ("response_chars", "Response chars"),
    ("memory_write_chars", "Memory written chars"),
)
"""Table 1's columns: key and label, in the paper's order."""

TABLE1_KEYS = tuple(key for key, _ in TABLE1)

_SUMMED = {
    "memory_tool_ops": "memory_ops_total",
    "messages_to_operator": "messages_to_operator",
    "reflection_chars": "reflection_chars",
    "response_chars": "response_chars",
    "memory_write_chars": "memory_write_chars",
}
"""Table 1 key -> the per-cycle metric it sums over the run's cycles."""

EXTRAS: tuple[str, ...] = (
    "steps",
    "tool_calls",
    "tokens_in",
    "tokens_out",
    "model_seconds",
    "nudges",
    "errors",
)
"""Run totals reported beside Table 1 (not in the paper, useful for local models)."""

CYCLE_METRICS: tuple[str, ...] = (
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
    "model_seconds",
    "nudges",
    "errors",
    "repeated_calls",
    "trims",
)
"""Per-cycle metric columns, in the order tables and CSV files show them."""

TOOL_NAMES: tuple[str, ...] = (*sorted(MEMORY_TOOLS), OPERATOR_TOOL)


def _number(value: Any) -> float:
    # Stored metrics sum server numbers: read through the one check, a count too large
    # for a float (or negative, NaN, text) is absent, not an OverflowError in Table 1.
    return float(number_or_zero(value))


def _tidy(value: float) -> float | int:
    """Whole numbers as int, so tables print `12`, not `12.0`."""
    return int(value) if float(value).is_integer() else round(value, 4)


def cycle_table(
    engine: Engine, run: RunRecord, *, with_reflection: bool = False
) -> list[dict[str, Any]]:
    """One row per finished cycle of `run`: its metrics, tool calls by name, similarity.

    Args:
        engine: The storage's engine.
        run: The run.
        with_reflection: Add the reflection text as the last column.

    Returns:
        Rows with the keys `run_id`, `model`, `cycle`, every `CYCLE_METRICS` name,
        `calls_<tool>` for the six tools (and any other name the model called),
        `similarity`, `similarity_level`, `similarity_method`, `flags`
        (and `reflection`).
    """
    records = cycle_records(engine, run.run_id)
    models: dict[int, str] = {}
    similarity: dict[int, dict[str, Any]] = {}
    for cycle, kind, payload in events_of_type(
        engine, run.run_id, ("LLM_INVOCATION", "SIMILARITY")
    ):
        if kind == "LLM_INVOCATION":
            model = LlmInvocation.read(payload).options.get("model")
            if model:
                models[cycle] = str(model)
        else:
            similarity[cycle] = payload
    extra_tools = sorted(
        {n for r in records for n in (r.metrics.get("tool_calls_by_name") or {})} - set(TOOL_NAMES)
    )
    rows = []
    for record in records:
        m = record.metrics
        row: dict[str, Any] = {
            "run_id": run.run_id,
            "model": models.get(record.cycle, run.model),
            "cycle": record.cycle,
        }
        for name in CYCLE_METRICS:
            row[name] = _tidy(_number(m.get(name)))
        by_name = m.get("tool_calls_by_name") or {}
        for tool in (*TOOL_NAMES, *extra_tools):
            row[f"calls_{tool}"] = int(_number(by_name.get(tool)))
        sim = similarity.get(record.cycle, {})
        # A cycle with nothing to compare (the first) has no similarity, not a zero one.
        compared = sim.get("method", "none") != "none" if sim else record.similarity is not None
        row["similarity"] = record.similarity if compared else None
        row["similarity_level"] = sim.get("level", "")
        row["similarity_method"] = sim.get("method", "")
        row["flags"] = ";".join(record.flags)
        if with_reflection:
            row["reflection"] = record.reflection
        rows.append(row)
    return rows


@dataclass(frozen=True)
class RunSummary:
    """One run's Table 1 row, with a few extra totals."""

    run_id: str
    model: str
    batch: str | None
    status: str
    cycles: int
    values: dict[str, float | int]
    """Table 1: `TABLE1_KEYS` -> run total (final memory keys: the last cycle's count)."""
    extras: dict[str, float | int] = field(default_factory=dict)
    """`EXTRAS` -> run total."""


def summarize_cycles(records: Sequence[CycleRecord]) -> dict[str, float | int]:
    """Table 1 values of a run from its finished cycles (all zero when it has none)."""
    values: dict[str, float | int] = {}
    for key in TABLE1_KEYS:
        if key == "final_memory_keys":
            last = records[-1].metrics.get("final_memory_keys") if records else 0
            values[key] = _tidy(_number(last))
        else:
            values[key] = _tidy(sum(_number(r.metrics.get(_SUMMED[key])) for r in records))
    return values


def run_summary(engine: Engine, run: RunRecord) -> RunSummary:
    """Table 1 of one run, from its stored cycles."""
    records = cycle_records(engine, run.run_id)
    extras = {name: _tidy(sum(_number(r.metrics.get(name)) for r in records)) for name in EXTRAS}
    return RunSummary(
        run_id=run.run_id,
        model=run.model,
        batch=run.batch,
        status=run.status,
        cycles=len(records),
        values=summarize_cycles(records),
        extras=extras,
    )


def mean_sd(values: Sequence[float]) -> tuple[float, float | None]:
    """Mean and sample standard deviation (n - 1); the sd is None for fewer than 2 values.

    The sample sd because replicate runs are a sample of what a model might do.

    Raises:
        ValueError: No values.
    """
    if not values:
        raise ValueError("mean of no values")
    n = len(values)
    mean = math.fsum(values) / n
    if n < 2:
        return mean, None
    return mean, math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))


@dataclass(frozen=True)
class ModelSummary:
    """Table 1 of one model: mean, sd and 95 % interval over its runs of one length and batch."""

    model: str
    runs: list[str]
    mean: dict[str, float]
    sd: dict[str, float | None]
    cycles_mean: float
    batch: str | None = None
    """The runs' batch (None: runs outside any batch)."""
    cycles: int | None = None
    """The runs' length in cycles (every run of a summary has the same)."""
    label: str = ""
    """How a table names this group: the model, with its batch when batches are compared
    and its length when the model's runs differ in length."""
    intervals: dict[str, Interval] = field(default_factory=dict)
    """`TABLE1_KEYS` -> the mean's 95 % bootstrap interval over the runs."""


def model_summaries(rows: Sequence[RunSummary], *, seed: int = SEED) -> list[ModelSummary]:
    """Per-model Table 1 (mean, sd, 95 % interval over runs), in order of first appearance.

    Table 1's numbers are run totals, so runs of different lengths are never averaged
    together: a model whose runs differ in length (an extended run, one that failed
    early) gets one summary per length. Runs of several batches are summarized per
    batch, so two studies stand side by side. Each mean's interval is a bootstrap over
    the runs (`intervals.mean_interval`, seeded with `seed`).
    """
    by_batch = len({row.batch for row in rows}) > 1
    groups: dict[tuple[str | None, str, int], list[RunSummary]] = {}
    for row in rows:
        groups.setdefault((row.batch, row.model, row.cycles), []).append(row)
    lengths: dict[tuple[str | None, str], set[int]] = {}
    for batch, model, cycles in groups:
        lengths.setdefault((batch, model), set()).add(cycles)
    summaries = []
    for (batch, model, cycles), group in groups.items():
        mean: dict[str, float] = {}
        sd: dict[str, float | None] = {}
        intervals: dict[str, Interval] = {}
        for key in TABLE1_KEYS:
            values = [float(r.values[key]) for r in group]
            mean[key], sd[key] = mean_sd(values)
            intervals[key] = mean_interval(values, seed=seed)
        label = f"{batch} · {model}" if by_batch else model
        if len(lengths[(batch, model)]) > 1:
            label += f" · {cycles} cycles"
        summaries.append(
            ModelSummary(
                model=model,
                runs=[r.run_id for r in group],
                mean=mean,
                sd=sd,
                cycles_mean=float(cycles),
                batch=batch,
                cycles=cycles,
                label=label,
                intervals=intervals,
            )
        )
    first = {key: i for i, key in reversed(list(enumerate((m.batch, m.model) for m in summaries)))}
    return sorted(summaries, key=lambda m: (first[(m.batch, m.model)], m.cycles or 0))


def length_notes(summaries: Sequence[ModelSummary]) -> list[str]:
    """One sentence per model whose runs differ in length: they are shown apart, not pooled."""
    lengths: dict[str, list[int]] = {}
    by_batch = len({m.batch for m in summaries}) > 1
    for m in summaries:
        name = f"{m.batch} · {m.model}" if by_batch else m.model
        lengths.setdefault(name, []).append(m.cycles or 0)
    return [
        f"Runs of {name} differ in length ({', '.join(map(str, sorted(found)))} cycles): "
        "Table 1 shows each length apart, never pooled."
        for name, found in lengths.items()
        if len(found) > 1
    ]


def format_mean_sd(mean: float, sd: float | None, digits: int = 1) -> str:
    """`12.3 ± 4.5`, or just the mean when there is no sd (a single run)."""
    if sd is None:
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} ± {sd:.{digits}f}"
