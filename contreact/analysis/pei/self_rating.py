"""Self vs cross: does a model rate its own histories differently from how others rate them?

For a model M that both lived histories and evaluated, over each history h of M rated by M
and by at least one other evaluator (fresh ratings only, see `matrix`):

    d_h = (M's level for h) - (mean level the other evaluators gave h)
    difference = mean over h of d_h = self mean - cross mean

`self mean` is the mean of M's ratings of those histories, `cross mean` the mean over the
same histories of the other evaluators' mean, so the two means and their difference refer
to the same histories. A positive difference: M rates its own histories higher than the
other evaluators do.

The p-value is a two-sided sign-flip permutation test of "no difference" on the paired
d_h (`scipy.stats.permutation_test`, through `analysis.intervals`): under the null the sign
of each d_h is arbitrary, so p is the share of the 2^n sign assignments whose mean is at
least as far from 0 as the observed one. It is exact (every assignment) up to
`EXACT_UP_TO` histories, else estimated from `PERMUTATIONS` random assignments (seed
`SEED`, so a report is reproducible) as (count + 1) / (PERMUTATIONS + 1). With n histories
p cannot be below 2 / 2^n (0.5 for 2 replicates), which `SelfCross.min_p` gives beside it.
The difference has a bootstrap interval over the histories (`intervals.mean_interval`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from contreact.analysis.intervals import (
    RESAMPLES,
    Interval,
    mean_interval,
    paired_test,
)
from contreact.analysis.intervals import SEED as SEED
from contreact.analysis.pei.matrix import PeiMatrix

EXACT_UP_TO = int(math.log2(RESAMPLES))
"""Histories up to which every sign assignment is enumerated (2^13 = 8192)."""
PERMUTATIONS = RESAMPLES
"""Random sign assignments beyond `EXACT_UP_TO`."""


@dataclass(frozen=True)
class SelfCross:
    """One model's self-rating against the other evaluators' ratings of the same histories."""

    model: str
    histories: int
    """Histories with a self-rating and at least one cross-rating."""
    self_mean: float | None
    cross_mean: float | None
    difference: float | None
    """`self_mean - cross_mean` (None when no history qualifies)."""
    p_value: float | None
    """Two-sided sign-flip permutation p (None when no history qualifies)."""
    exact: bool = True
    """Whether p enumerates every sign assignment (else it is estimated)."""
    differences: tuple[float, ...] = ()
    """The per-history d_h, in row order."""
    interval: Interval | None = None
    """The difference's 95 % bootstrap interval over the histories."""

    @property
    def min_p(self) -> float | None:
        """The smallest p the test can give with this many histories."""
        if not self.histories:
            return None
        return 2.0 / 2**self.histories if self.exact else 1.0 / (PERMUTATIONS + 1)

    def sentence(self) -> str:
        """One line for the report."""
        if self.difference is None or self.p_value is None:
            return (
                f"{self.model}: no self vs cross figure (no history of it rated by itself "
                "and by another evaluator)"
            )
        if self.difference == 0:
            direction = "the same as"
        else:
            way = "higher" if self.difference > 0 else "lower"
            direction = f"{abs(self.difference):.2f} levels {way} than"
        how = "exact" if self.exact else f"from {PERMUTATIONS} random sign flips, seed {SEED}"
        interval = ""
        if self.interval is not None and self.interval.low is not None:
            interval = f", 95 % interval {self.interval.text(2)}"
            if self.interval.few:
                interval += f", {self.interval.note('histories')}"
        return (
            f"{self.model} rated its own histories {direction} the other evaluators did "
            f"(self {self.self_mean:.2f} vs cross {self.cross_mean:.2f} over "
            f"{self.histories} histor{'y' if self.histories == 1 else 'ies'}{interval}; "
            f"sign-flip permutation p = {self.p_value:.3g}, {how}; "
            f"the smallest p possible here is {self.min_p:.3g})"
        )


def sign_flip_p(differences: np.ndarray) -> tuple[float, bool]:
    """Two-sided sign-flip permutation p of mean(`differences`) == 0, and whether exact."""
    test = paired_test([differences.tolist()])
    return (1.0 if test.p_value is None else test.p_value), test.exact


def self_vs_cross(matrix: PeiMatrix) -> list[SelfCross]:
    """The self vs cross figure of every model that lived histories and evaluated.

    Args:
        matrix: The run x evaluator matrix (one row per history).
    """
    found: list[SelfCross] = []
    for model in matrix.columns:
        if model not in matrix.row_models:
            continue
        own = matrix.columns.index(model)
        selves: list[float] = []
        crosses: list[float] = []
        for row, writer in zip(matrix.cells, matrix.row_models, strict=True):
            others = [v for j, v in enumerate(row) if j != own and v is not None]
            if writer == model and row[own] is not None and others:
                selves.append(float(row[own]))  # type: ignore[arg-type]
                crosses.append(sum(others) / len(others))
        if not selves:
            found.append(SelfCross(model, 0, None, None, None, None))
            continue
        d = np.array(selves) - np.array(crosses)
        p, exact = sign_flip_p(d)
        found.append(
            SelfCross(
                model=model,
                histories=len(selves),
                self_mean=float(np.mean(selves)),
                cross_mean=float(np.mean(crosses)),
                difference=float(d.mean()),
                p_value=p,
                exact=exact,
                differences=tuple(float(v) for v in d),
                interval=mean_interval(d.tolist()),
            )
        )
    return found
