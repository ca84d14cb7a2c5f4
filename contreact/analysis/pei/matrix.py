"""PEI ratings as a matrix: rated histories as rows, evaluator models as columns.

The shape of Szeider (2025), Table 2: evaluator means, history means, the per-model
matrix (histories grouped by the model that wrote them) and the agreement between
evaluators (`contreact.analysis.agreement`).

One order serves rows and columns: the models that lived the histories, in the order
the runs are given (a batch's config order), then evaluators that lived no history. So
in the model x model matrix the diagonal holds the self-ratings (a model rating its own
histories), and the run matrix lists its columns in the same order.

A rating made before its run's last cycle (the run was extended after it was rated) is
stale: it rated a shorter history than the run now holds. It is kept out of the cells,
the means and the agreement, and listed (`PeiMatrix.stale`) for the footnotes; fresh
ratings of runs of different lengths are pooled only with a note saying so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from contreact.analysis.agreement import Agreement, agreement
from contreact.analysis.pei.results import PeiResult
from contreact.checkpoints.registry import RunRecord


def _mean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


@dataclass(frozen=True)
class StaleRating:
    """A rating of a run made before the run's last cycle (kept out of the cells)."""

    run_id: str
    evaluator: str
    level: int | None
    at_cycle: int
    last_cycle: int

    def describe(self) -> str:
        """One line: whose rating, made at which cycle of how many."""
        level = "–" if self.level is None else self.level
        return (
            f"{self.evaluator}'s rating of {self.run_id} is stale: made at cycle "
            f"{self.at_cycle} of {self.last_cycle} (level {level}, left out of the means; "
            "`contreact pei --refresh` re-rates it)"
        )


def model_order(row_models: Sequence[str], evaluators: Sequence[str]) -> list[str]:
    """The one order of rows and columns.

    The rated models (in order of first appearance) that also evaluate, then the other
    evaluators in the order given.
    """
    wanted = set(evaluators)
    lived = [m for m in dict.fromkeys(row_models) if m in wanted]
    return [*lived, *(e for e in dict.fromkeys(evaluators) if e not in lived)]


@dataclass(frozen=True)
class PeiMatrix:
    """Ratings with histories as rows and evaluators as columns (Szeider 2025, Table 2)."""

    rows: list[str]
    """History labels: run ids, or model names in the per-model matrix."""
    columns: list[str]
    """Evaluator models, in `model_order`."""
    cells: list[list[float | None]]
    """`cells[i][j]`: evaluator j's level for history i (per model: the mean), or None
    (no rating, no level parsed, or a stale rating)."""
    row_models: list[str] = field(default_factory=list)
    """The model that wrote each history."""
    horizons: list[list[int]] = field(default_factory=list)
    """The cycles rated, per row: one value for a run, every run's for a model."""
    stale: list[StaleRating] = field(default_factory=list)
    """Ratings left out because their run went on after them."""

    @property
    def evaluator_means(self) -> list[float | None]:
        """Each evaluator's mean level over the histories it rated."""
        return [_mean([row[j] for row in self.cells]) for j in range(len(self.columns))]

    @property
    def history_means(self) -> list[float | None]:
        """Each history's mean level over its evaluators."""
        return [_mean(row) for row in self.cells]

    def agreement(self) -> list[Agreement]:
        """ICC(A,1) (primary) and Kendall's W over the complete rows, Krippendorff's alpha."""
        return agreement(self.cells)

    def stale_at(self, row: int, column: int) -> StaleRating | None:
        """The stale rating behind an empty run-matrix cell, if there is one."""
        for s in self.stale:
            if s.run_id == self.rows[row] and s.evaluator == self.columns[column]:
                return s
        return None

    def self_column(self, row: int) -> int | None:
        """The column of the evaluator that wrote history `row` (its self-rating), or None."""
        model = self.row_models[row] if row < len(self.row_models) else None
        return self.columns.index(model) if model in self.columns else None

    def pooled_lengths(self) -> str:
        """A note when the means pool histories of different lengths ("" when they do not)."""
        by_length: dict[int, list[str]] = {}
        for label, lengths, row in zip(self.rows, self.horizons, self.cells, strict=True):
            if any(v is not None for v in row):
                for length in dict.fromkeys(lengths):
                    by_length.setdefault(length, []).append(label)
        if len(by_length) < 2:
            return ""
        parts = [f"{n} cycles ({', '.join(labels)})" for n, labels in sorted(by_length.items())]
        return "these means pool histories of different lengths: " + "; ".join(parts)

    def notes(self) -> list[str]:
        """The footnotes: pooled lengths, then each stale rating."""
        pooled = self.pooled_lengths()
        return [*([pooled] if pooled else []), *(s.describe() for s in self.stale)]

    def by_model(self) -> PeiMatrix:
        """Histories grouped by the model that wrote them, cells averaged (the paper's 6x6).

        Rows follow the columns' order (models that evaluate first), so the diagonal holds
        the self-ratings; models that lived histories but did not evaluate come last.
        """
        groups: dict[str, list[int]] = {}
        for i, model in enumerate(self.row_models):
            groups.setdefault(model, []).append(i)
        order = [m for m in self.columns if m in groups] + [
            m for m in groups if m not in self.columns
        ]
        return PeiMatrix(
            rows=order,
            columns=list(self.columns),
            cells=[
                [_mean([self.cells[i][j] for i in groups[m]]) for j in range(len(self.columns))]
                for m in order
            ],
            row_models=order,
            horizons=[sorted({n for i in groups[m] for n in self.horizons[i]}) for m in order],
            stale=list(self.stale),
        )


def build_matrix(
    results: Sequence[PeiResult],
    runs: Sequence[RunRecord],
    evaluators: Sequence[str] | None = None,
    last_cycles: Mapping[str, int] | None = None,
) -> PeiMatrix:
    """The run x evaluator matrix of `results` for `runs` (rows in that order).

    Args:
        results: Stored ratings.
        runs: The rated runs, one row each, in config order.
        evaluators: The evaluators (default: every evaluator in `results`, sorted); the
            columns put those that lived a history first (`model_order`).
        last_cycles: Each run's last cycle; a rating made before it is stale (default:
            every rating is taken as made at its run's last cycle).
    """
    named = list(evaluators) if evaluators is not None else sorted({r.evaluator for r in results})
    columns = model_order([r.model for r in runs], named)
    found = {(r.run_id, r.evaluator): r for r in results}
    last = dict(last_cycles or {})
    cells: list[list[float | None]] = []
    horizons: list[list[int]] = []
    stale: list[StaleRating] = []
    for run in runs:
        rated = [found[(run.run_id, e)] for e in columns if (run.run_id, e) in found]
        length = last.get(run.run_id, max((r.at_cycle for r in rated), default=0))
        horizons.append([length])
        row: list[float | None] = []
        for evaluator in columns:
            rating = found.get((run.run_id, evaluator))
            if rating is not None and rating.at_cycle < length:
                stale.append(
                    StaleRating(run.run_id, evaluator, rating.level, rating.at_cycle, length)
                )
                rating = None
            row.append(None if rating is None or rating.level is None else float(rating.level))
        cells.append(row)
    return PeiMatrix(
        rows=[r.run_id for r in runs],
        columns=columns,
        cells=cells,
        row_models=[r.model for r in runs],
        horizons=horizons,
        stale=stale,
    )
