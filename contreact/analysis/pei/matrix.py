"""PEI ratings as a matrix: rated histories as rows, evaluator models as columns.

The shape of Szeider (2025), Table 2: evaluator means, history means, the per-model
matrix (histories grouped by the model that wrote them) and the agreement between
evaluators (`contreact.analysis.agreement`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from contreact.analysis.agreement import Agreement, icc_a1, kendalls_w
from contreact.analysis.pei.results import PeiResult
from contreact.checkpoints.registry import RunRecord


def _mean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


@dataclass(frozen=True)
class PeiMatrix:
    """Ratings with histories as rows and evaluators as columns (Szeider 2025, Table 2)."""

    rows: list[str]
    """History labels: run ids, or model names in the per-model matrix."""
    columns: list[str]
    """Evaluator models."""
    cells: list[list[float | None]]
    """`cells[i][j]`: evaluator j's level for history i (per model: the mean), or None."""
    row_models: list[str] = field(default_factory=list)
    """The model that wrote each history."""

    @property
    def evaluator_means(self) -> list[float | None]:
        """Each evaluator's mean level over the histories it rated."""
        return [_mean([row[j] for row in self.cells]) for j in range(len(self.columns))]

    @property
    def history_means(self) -> list[float | None]:
        """Each history's mean level over its evaluators."""
        return [_mean(row) for row in self.cells]

    def agreement(self) -> list[Agreement]:
        """ICC(A,1) (primary) and Kendall's W over the complete rows."""
        return [icc_a1(self.cells), kendalls_w(self.cells)]

    def by_model(self) -> PeiMatrix:
        """Histories grouped by the model that wrote them, cells averaged (the paper's 6x6)."""
        groups: dict[str, list[list[float | None]]] = {}
        for model, row in zip(self.row_models, self.cells, strict=True):
            groups.setdefault(model, []).append(row)
        return PeiMatrix(
            rows=list(groups),
            columns=list(self.columns),
            cells=[
                [_mean([row[j] for row in group]) for j in range(len(self.columns))]
                for group in groups.values()
            ],
            row_models=list(groups),
        )


def build_matrix(
    results: Sequence[PeiResult],
    runs: Sequence[RunRecord],
    evaluators: Sequence[str] | None = None,
) -> PeiMatrix:
    """The run x evaluator matrix of `results` for `runs` (rows in that order).

    Args:
        results: Stored ratings.
        runs: The rated runs, one row each.
        evaluators: Column order (default: every evaluator in `results`, sorted).
    """
    columns = list(evaluators) if evaluators is not None else sorted({r.evaluator for r in results})
    level = {(r.run_id, r.evaluator): r.level for r in results}
    cells: list[list[float | None]] = []
    for run in runs:
        row: list[float | None] = []
        for evaluator in columns:
            value = level.get((run.run_id, evaluator))
            row.append(None if value is None else float(value))
        cells.append(row)
    return PeiMatrix(
        rows=[r.run_id for r in runs],
        columns=columns,
        cells=cells,
        row_models=[r.model for r in runs],
    )
