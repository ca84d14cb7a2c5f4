"""Inter-rater agreement of PEI ratings: do evaluator models agree on a history's level?

Three statistics, because they answer different questions and the paper's finding is the
gap between them:

* ICC(A,1) (McGraw & Wong 1996; ICC(2,1) in Shrout & Fleiss 1979), two-way random
  effects, absolute agreement, single rater: do evaluators give a history the *same
  level*? Evaluator models are a sample of the models one could ask, every evaluator
  rates every history, and a systematic offset between evaluators (one answers 1 to
  everything, another 8) is exactly the disagreement the PEI experiment is about, so the
  absolute-agreement form, which counts that offset as error, is the primary statistic.
  Its 95 % interval is McGraw & Wong's (1996, case 2A), from the F distribution with
  Satterthwaite's degrees of freedom.
* Kendall's W with the tie correction: do evaluators *rank* the histories alike? It
  ignores offsets, so W high and ICC low means "same ordering, different scales".
* Krippendorff's alpha (interval level, the `krippendorff` package): agreement on the
  levels that uses every rating, incomplete histories included; its interval is a
  percentile bootstrap over the histories (seeded).

ICC and W use the complete rows only (histories every evaluator rated); all need at least
two histories and two evaluators; when a statistic is undefined (too few ratings, or no
variance at all) it is None with the reason. ICC and W are written out here (a few lines
of numpy each); tests/unit/test_agreement.py holds them equal to pingouin's.

The same statistics over one evaluator's repeated ratings (`pei --repeat K`: histories x
repeats) measure its test-retest consistency (`test_retest`).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import krippendorff
import numpy as np
import numpy.typing as npt
from scipy import stats

from contreact.analysis.intervals import CONFIDENCE, SEED

Matrix = Sequence[Sequence[float | int | None]]
"""Rows: subjects (histories); columns: raters (evaluators); None: no rating."""


@dataclass(frozen=True)
class Agreement:
    """One agreement statistic over a ratings matrix."""

    statistic: str
    value: float | None
    subjects: int
    """Complete rows used."""
    raters: int
    reason: str = ""
    """Why `value` is None."""
    low: float | None = None
    high: float | None = None
    """The 95 % interval (None: not defined, or not computed for this statistic)."""
    method: str = ""
    """How the interval was made."""

    def interval_text(self) -> str:
        """`[low, high]`, or "" without an interval."""
        if self.low is None or self.high is None:
            return ""
        return f"[{self.low:.2f}, {self.high:.2f}]"


def describe(agreement: Agreement, subjects: str = "histories", raters: str = "evaluators") -> str:
    """One sentence: the value, its interval and what it rests on, or why it is undefined."""
    a = agreement
    if a.value is None:
        return f"{a.statistic}: undefined ({a.reason})"
    if a.statistic.startswith("Krippendorff"):
        basis = f"{a.subjects} {subjects}, {a.raters} {raters}, every rating used"
    else:
        basis = f"{a.subjects} {subjects} rated by all {a.raters} {raters}"
    interval = f", 95 % interval {a.interval_text()}" if a.interval_text() else ""
    return f"{a.statistic} = {a.value:.3f}{interval} ({basis}): {reading(a, raters)}"


def reading(agreement: Agreement, raters: str = "evaluators") -> str:
    """What the value means, in one plain sentence.

    ICC bands follow Koo & Li (2016): below 0.5 poor, 0.5-0.75 moderate, 0.75-0.9 good,
    above 0.9 excellent. A negative ICC is possible with few histories: the evaluators
    disagree with each other (including systematic offsets) more than the histories
    differ, i.e. no agreement at all. Kendall's W runs from 0 (no shared ranking) to 1.
    """
    value = agreement.value
    if value is None:
        return f"undefined ({agreement.reason})"
    if agreement.statistic.startswith(("ICC", "Krippendorff")):
        if value < 0:
            return (
                f"negative: the {raters} disagree with each other more than the histories "
                "differ (no agreement on levels)"
            )
        band = (
            "poor"
            if value < 0.5
            else "moderate"
            if value < 0.75
            else "good"
            if value < 0.9
            else "excellent"
        )
        return f"{band} agreement on the levels themselves"
    band = "weak" if value < 0.3 else "moderate" if value < 0.7 else "strong"
    return f"{band} agreement on how the histories rank (offsets ignored)"


def complete_rows(matrix: Matrix) -> npt.NDArray[np.float64]:
    """The rows with a rating from every rater, as a float array (subjects x raters)."""
    rows: list[list[float]] = []
    for row in matrix:
        values = [float(v) for v in row if v is not None]
        if row and len(values) == len(row):
            rows.append(values)
    if not rows:
        return np.zeros((0, len(matrix[0]) if matrix else 0))
    return np.asarray(rows, dtype=np.float64)


def _shape_problem(data: npt.NDArray[np.float64], raters: int) -> str:
    if raters < 2:
        return "needs at least 2 evaluators"
    if data.shape[0] < 2:
        return f"needs at least 2 histories rated by every evaluator, found {data.shape[0]}"
    return ""


def icc_a1(matrix: Matrix) -> Agreement:
    """ICC(A,1): two-way random effects, absolute agreement, single rater.

    ICC = (MSR - MSE) / (MSR + (k - 1) MSE + k (MSC - MSE) / n), with n subjects, k raters,
    MSR/MSC/MSE the row, column and residual mean squares of the two-way ANOVA.

    Args:
        matrix: Ratings, subjects x raters; incomplete rows are dropped.

    Returns:
        The statistic (None with a reason when undefined).
    """
    raters = len(matrix[0]) if matrix else 0
    data = complete_rows(matrix)
    n = int(data.shape[0])
    problem = _shape_problem(data, raters)
    if problem:
        return Agreement("ICC(A,1)", None, n, raters, problem)
    k = raters
    grand = data.mean()
    ss_rows = k * float(((data.mean(axis=1) - grand) ** 2).sum())
    ss_cols = n * float(((data.mean(axis=0) - grand) ** 2).sum())
    ss_total = float(((data - grand) ** 2).sum())
    ss_error = ss_total - ss_rows - ss_cols
    msr = ss_rows / (n - 1)
    msc = ss_cols / (k - 1)
    mse = ss_error / ((n - 1) * (k - 1))
    denominator = msr + (k - 1) * mse + k * (msc - mse) / n
    if denominator <= 1e-12:
        return Agreement("ICC(A,1)", None, n, k, "all ratings are equal (no variance)")
    icc = float((msr - mse) / denominator)
    low, high = _icc_interval(icc, msr, msc, mse, n, k)
    return Agreement("ICC(A,1)", icc, n, k, low=low, high=high, method="F (McGraw & Wong 2A)")


def _icc_interval(
    icc: float, msr: float, msc: float, mse: float, n: int, k: int
) -> tuple[float | None, float | None]:
    """McGraw & Wong's (1996) 95 % interval of ICC(A,1), Satterthwaite's df for the error."""
    if mse <= 0:
        return None, None  # no residual variance: the F ratios are infinite
    alpha = 1 - CONFIDENCE
    fj = msc / mse
    vn = (k - 1) * (n - 1) * (k * icc * fj + n * (1 + (k - 1) * icc) - k * icc) ** 2
    vd = (n - 1) * k**2 * icc**2 * fj**2 + (n * (1 + (k - 1) * icc) - k * icc) ** 2
    if vd <= 0:
        return None, None
    v = vn / vd
    upper_f = float(stats.f.ppf(1 - alpha / 2, n - 1, v))
    lower_f = float(stats.f.ppf(1 - alpha / 2, v, n - 1))
    spread = k * msc + (k * n - k - n) * mse
    low = n * (msr - upper_f * mse) / (upper_f * spread + n * msr)
    high = n * (lower_f * msr - mse) / (spread + n * lower_f * msr)
    if not (np.isfinite(low) and np.isfinite(high)):
        return None, None
    return float(low), float(high)


def _ranks(values: npt.NDArray[np.float64]) -> tuple[npt.NDArray[np.float64], float]:
    """Mid-ranks of `values` (ties share their average rank) and the tie term sum(t^3 - t)."""
    order = np.argsort(values, kind="mergesort")
    ranks = np.empty(len(values), dtype=np.float64)
    ties = 0.0
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[order[j + 1]] == values[order[i]]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2 + 1
        t = j - i + 1
        ties += t**3 - t
        i = j + 1
    return ranks, ties


def kendalls_w(matrix: Matrix) -> Agreement:
    """Kendall's coefficient of concordance W, corrected for ties.

    W = 12 S / (m^2 (n^3 - n) - m sum_j T_j), S the squared deviations of the subjects'
    rank sums from their mean, m raters, n subjects, T_j = sum(t^3 - t) over rater j's
    groups of tied ratings.

    Args:
        matrix: Ratings, subjects x raters; incomplete rows are dropped.

    Returns:
        The statistic in [0, 1] (None with a reason when undefined).
    """
    raters = len(matrix[0]) if matrix else 0
    data = complete_rows(matrix)
    n = int(data.shape[0])
    problem = _shape_problem(data, raters)
    if problem:
        return Agreement("Kendall's W", None, n, raters, problem)
    m = raters
    rank_sums = np.zeros(n, dtype=np.float64)
    tie_total = 0.0
    for j in range(m):
        ranks, ties = _ranks(data[:, j])
        rank_sums += ranks
        tie_total += ties
    s = float(((rank_sums - rank_sums.mean()) ** 2).sum())
    denominator = m**2 * (n**3 - n) - m * tie_total
    if denominator <= 1e-12:
        return Agreement(
            "Kendall's W", None, n, m, "every evaluator rated all histories alike (all ties)"
        )
    return Agreement("Kendall's W", float(min(1.0, max(0.0, 12 * s / denominator))), n, m)


ALPHA_RESAMPLES = 1999
"""Bootstrap resamples of Krippendorff's alpha (each one a call of the package)."""


def _alpha(data: npt.NDArray[np.float64]) -> float:
    """Krippendorff's alpha of subjects x raters (NaN: no rating); NaN when undefined."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            return float(
                krippendorff.alpha(reliability_data=data.T, level_of_measurement="interval")
            )
        except (ValueError, ZeroDivisionError):
            return float("nan")


def krippendorff_alpha(matrix: Matrix, *, seed: int = SEED) -> Agreement:
    """Krippendorff's alpha (interval level) with a bootstrap interval over the histories.

    Uses every rating: a history some evaluators did not rate still counts, with the
    ratings it has (a history needs two to be pairable).
    """
    raters = len(matrix[0]) if matrix else 0
    data = np.asarray(
        [[np.nan if v is None else float(v) for v in row] for row in matrix], dtype=np.float64
    ).reshape(len(matrix), raters)
    pairable = data[np.sum(~np.isnan(data), axis=1) >= 2] if raters else data
    n = int(pairable.shape[0])
    name = "Krippendorff's alpha"
    if raters < 2 or n < 2:
        why = "needs at least 2 evaluators" if raters < 2 else "needs at least 2 histories"
        return Agreement(name, None, n, raters, f"{why} with 2 or more ratings")
    if np.nanmax(pairable) == np.nanmin(pairable):
        return Agreement(name, None, n, raters, "all ratings are equal (no variance)")
    value = _alpha(pairable)
    if not np.isfinite(value):
        return Agreement(name, None, n, raters, "undefined for these ratings")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.DegenerateDataWarning)
        result = stats.bootstrap(
            (np.arange(n),),
            lambda rows: _alpha(pairable[rows.astype(int)]),
            vectorized=False,
            n_resamples=ALPHA_RESAMPLES,
            confidence_level=CONFIDENCE,
            method="percentile",
            rng=np.random.default_rng(seed),
        )
    # A resample whose ratings are all equal has no alpha: it is left out of the
    # percentiles (scipy's would turn the whole interval into NaN).
    found = np.asarray(result.bootstrap_distribution, dtype=np.float64)
    found = found[np.isfinite(found)]
    if len(found) < ALPHA_RESAMPLES / 2:
        return Agreement(name, value, n, raters)
    tail = 100 * (1 - CONFIDENCE) / 2
    low, high = (float(x) for x in np.percentile(found, [tail, 100 - tail]))
    return Agreement(
        name, value, n, raters, low=low, high=high, method="percentile bootstrap over histories"
    )


def agreement(matrix: Matrix) -> list[Agreement]:
    """ICC(A,1) (primary), Kendall's W and Krippendorff's alpha of a ratings matrix."""
    return [icc_a1(matrix), kendalls_w(matrix), krippendorff_alpha(matrix)]
