"""Uncertainty for every model-level number: bootstrap intervals, permutation tests, effect sizes.

A study has a handful of runs per model, and each run's cycles are not independent of each
other, so the unit of resampling is the run: a model's Table 1 number is the mean of its
runs' totals, and its interval is a bootstrap over those runs (cycles stay clustered in
their run). Comparisons are permutation tests, exact whenever the arrangements can be
enumerated, so no p-value rests on a normal approximation. Everything is seeded: a report
made twice gives the same intervals.

The statistics themselves are scipy's (`scipy.stats.bootstrap`, `permutation_test`,
`mannwhitneyu`, `wilcoxon`); this module picks the method for the sample at hand, handles
the samples scipy cannot (one run, no variance), and says in words what was done.

* Interval of a mean: BCa bootstrap from `FEW_RUNS` runs on; below that the percentile
  bootstrap (BCa's corrections rest on normal quantiles a handful of values cannot
  support), flagged as resting on few runs. One run has no interval.
* Paired differences (the same model, the same replicate seed, two conditions): the
  estimate is the mean over models of each model's mean difference; its interval is a
  bootstrap that resamples pairs within each model (stratified), its test flips the sign
  of each pair's difference.
* Independent samples (two models): the difference of means, a two-sample bootstrap and a
  permutation test that reassigns runs between the samples.
* Effect sizes are rank-based, defined however small or tied the samples: Cliff's delta
  (independent) and the matched-pairs rank-biserial correlation (paired), both from -1 to 1.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from scipy import stats

SEED = 20250925
"""The random generator's seed for every bootstrap and estimated permutation p."""
RESAMPLES = 9999
"""Bootstrap resamples, and the most permutations a test enumerates before it samples."""
BAND_RESAMPLES = 1999
"""Bootstrap resamples per cycle of a trajectory's band (hundreds of cycles per panel)."""
CONFIDENCE = 0.95
FEW_RUNS = 5
"""Below this many runs an interval is a percentile bootstrap and is flagged as such."""

Array = npt.NDArray[np.float64]
Method = Literal["BCa", "percentile"]


def method_for(n: int) -> Method:
    """The bootstrap method for `n` resampled units: BCa from `FEW_RUNS` on."""
    return "BCa" if n >= FEW_RUNS else "percentile"


@dataclass(frozen=True)
class Interval:
    """A 95 % interval of an estimate, and how it was made."""

    estimate: float | None
    low: float | None
    high: float | None
    n: int
    """The units resampled: runs, or pairs of runs."""
    method: str
    """`BCa bootstrap`, `percentile bootstrap`, or why there is none."""
    standard_error: float | None = None
    """The bootstrap standard error (None without an interval)."""

    @property
    def few(self) -> bool:
        """Whether the interval rests on fewer than `FEW_RUNS` units."""
        return self.n < FEW_RUNS

    def note(self, unit: str = "runs") -> str:
        """What a reader must know beside the interval ("" when nothing)."""
        if self.low is None:
            return self.method
        if self.few:
            return f"n = {self.n} {unit} (< {FEW_RUNS}): percentile bootstrap, likely too narrow"
        return ""

    def text(self, digits: int = 1, scale: float = 1.0) -> str:
        """`[low, high]`, or a dash when there is no interval."""
        if self.low is None or self.high is None:
            return "–"
        return f"[{shown(self.low / scale, digits)}, {shown(self.high / scale, digits)}]"


def shown(value: float, digits: int) -> str:
    """`value` to `digits` decimals, never `-0.00`."""
    text = f"{value:.{digits}f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text


def _none(estimate: float | None, n: int, why: str) -> Interval:
    return Interval(estimate, None, None, n, why)


def _bootstrap(
    samples: Sequence[Array],
    statistic: Callable[..., Any],
    n: int,
    *,
    seed: int,
    resamples: int,
    axis: int = -1,
) -> tuple[Any, Any, Any, str]:
    """Scipy's bootstrap with the method for `n` units; percentile where BCa is undefined."""
    method = method_for(n)
    for attempt in (method, "percentile"):
        with warnings.catch_warnings():
            # No variance in a resample: BCa is undefined (NaN), the percentile one is not.
            warnings.simplefilter("ignore", stats.DegenerateDataWarning)
            warnings.simplefilter("ignore", RuntimeWarning)
            result = stats.bootstrap(
                tuple(samples),
                statistic,
                n_resamples=resamples,
                confidence_level=CONFIDENCE,
                method=attempt,
                axis=axis,
                rng=np.random.default_rng(seed),
            )
        low, high = result.confidence_interval
        if np.all(np.isfinite(low)) and np.all(np.isfinite(high)):
            return low, high, result.standard_error, f"{attempt} bootstrap"
    return low, high, result.standard_error, "percentile bootstrap"


def mean_interval(
    values: Sequence[float], *, seed: int = SEED, resamples: int = RESAMPLES
) -> Interval:
    """The mean of per-run values with its bootstrap interval over the runs.

    Equal to `scipy.stats.bootstrap((values,), np.mean, method=method_for(n),
    n_resamples=resamples, rng=np.random.default_rng(seed))`: the runs are the units, so
    whatever a run's cycles share stays inside its value.
    """
    data = np.asarray(values, dtype=np.float64)
    n = len(data)
    if n == 0:
        return _none(None, 0, "no runs")
    estimate = float(data.mean())
    if n == 1:
        return _none(estimate, 1, "one run: no interval")
    if float(np.ptp(data)) == 0.0:
        return Interval(estimate, estimate, estimate, n, "every run has this value", 0.0)
    low, high, se, method = _bootstrap([data], np.mean, n, seed=seed, resamples=resamples)
    return Interval(estimate, float(low), float(high), n, method, float(se))


def mean_bands(
    data: Array, *, seed: int = SEED, resamples: int = BAND_RESAMPLES
) -> tuple[Array, Array, Array]:
    """Mean and bootstrap band per column of runs x points (NaN: the run has no value there).

    Each column is resampled over the runs that have a value in it; a column with one run
    has no band (NaN), one whose runs agree has a band of no width.
    """
    runs, points = data.shape
    mean = np.full(points, np.nan)
    low = np.full(points, np.nan)
    high = np.full(points, np.nan)
    present = ~np.isnan(data)
    groups: dict[tuple[bool, ...], list[int]] = {}
    for column in range(points):
        groups.setdefault(tuple(present[:, column]), []).append(column)
    for rows_present, columns in groups.items():
        rows = [i for i, here in enumerate(rows_present) if here]
        if not rows:
            continue
        block = data[np.ix_(rows, columns)]
        mean[columns] = block.mean(axis=0)
        if len(rows) < 2:
            continue
        flat = np.ptp(block, axis=0) == 0
        low[columns] = high[columns] = block.mean(axis=0)
        varying = [c for c, same in zip(columns, flat, strict=True) if not same]
        if varying:
            picked = data[np.ix_(rows, varying)]
            lo, hi, _, _ = _bootstrap(
                [picked], np.mean, len(rows), seed=seed, resamples=resamples, axis=0
            )
            low[varying], high[varying] = lo, hi
    return mean, low, high


@dataclass(frozen=True)
class PermutationTest:
    """A two-sided permutation test of "no difference"."""

    p_value: float | None
    exact: bool
    """Every arrangement enumerated (else `RESAMPLES` random ones, seeded)."""
    smallest_p: float | None
    """The smallest p this many units can give (exact tests only)."""

    def text(self) -> str:
        """`p = 0.25 (exact; smallest possible 0.25)` or `p = 0.031 (9999 permutations)`."""
        if self.p_value is None:
            return "no test"
        if self.exact and self.smallest_p is None:
            return f"p = {self.p_value:.3g} (exact: no difference to test)"
        if self.exact:
            return f"p = {self.p_value:.3g} (exact; smallest possible {self.smallest_p:.3g})"
        return f"p = {self.p_value:.3g} ({RESAMPLES} random permutations, seed {SEED})"


def _permutation(
    samples: Sequence[Array],
    statistic: Callable[..., Any],
    kind: Literal["independent", "samples"],
    arrangements: int,
    seed: int,
) -> PermutationTest:
    if arrangements <= 2:
        # One value, or one run a side: a statistic and its mirror image, p = 1 always.
        return PermutationTest(1.0, True, 1.0)
    result = stats.permutation_test(
        tuple(samples),
        statistic,
        permutation_type=kind,
        vectorized=True,
        n_resamples=RESAMPLES,
        alternative="two-sided",
        rng=np.random.default_rng(seed),
    )
    exact = arrangements <= RESAMPLES
    smallest: float | None = None
    if exact:
        null = np.abs(np.asarray(result.null_distribution))
        # The most extreme arrangement's p: the share of arrangements as far from 0.
        smallest = float(np.mean(null >= null.max() * (1 - 1e-9)))
    return PermutationTest(float(result.pvalue), exact, smallest)


def _weighted_mean(weights: Array) -> Callable[..., Any]:
    def statistic(d: Array, axis: int = -1) -> Any:
        return np.sum(d * weights, axis=axis)

    return statistic


def paired_test(groups: Sequence[Sequence[float]], *, seed: int = SEED) -> PermutationTest:
    """Sign-flip test of the mean over groups of each group's mean paired difference."""
    kept = [np.asarray(g, dtype=np.float64) for g in groups if len(g)]
    if not kept:
        return PermutationTest(None, True, None)
    d = np.concatenate(kept)
    if not np.any(d):
        return PermutationTest(1.0, True, None)
    weights = np.concatenate([np.full(len(g), 1 / (len(kept) * len(g))) for g in kept])
    return _permutation([d], _weighted_mean(weights), "samples", 2 ** len(d), seed)


def paired_interval(groups: Sequence[Sequence[float]], *, seed: int = SEED) -> Interval:
    """The mean over groups of each group's mean paired difference, with a stratified bootstrap.

    Each group (a model) is resampled on its own, so every resample keeps every model; the
    method, and `Interval.n`, follow the smallest group (its pairs are what is resampled).
    """
    kept = [np.asarray(g, dtype=np.float64) for g in groups if len(g)]
    if not kept:
        return _none(None, 0, "no pairs")
    estimate = float(np.mean([g.mean() for g in kept]))
    # A model with one pair adds the same difference to every resample.
    varying = [g for g in kept if len(g) >= 2]
    fixed = sum(float(g.mean()) for g in kept if len(g) < 2)
    smallest = min(len(g) for g in varying) if varying else 1
    if not varying:
        return _none(estimate, 1, "one pair per model: no interval")
    if all(float(np.ptp(g)) == 0.0 for g in varying):
        return Interval(estimate, estimate, estimate, smallest, "every pair differs alike", 0.0)

    def mean_of_means(*samples: Array, axis: int = -1) -> Any:
        return (np.sum([s.mean(axis=axis) for s in samples], axis=0) + fixed) / len(kept)

    low, high, se, method = _bootstrap(
        varying, mean_of_means, smallest, seed=seed, resamples=RESAMPLES
    )
    return Interval(estimate, float(low), float(high), smallest, method, float(se))


def _difference(a: Array, b: Array, axis: int = -1) -> Any:
    return np.mean(b, axis=axis) - np.mean(a, axis=axis)


def independent_test(
    a: Sequence[float], b: Sequence[float], *, seed: int = SEED
) -> PermutationTest:
    """Permutation test of mean(b) - mean(a): runs reassigned between the two samples."""
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if len(x) < 2 or len(y) < 2:
        # One run on a side: a handful of arrangements, and scipy asks for two a side.
        return PermutationTest(None, True, None)
    if float(np.ptp(np.concatenate([x, y]))) == 0.0:
        return PermutationTest(1.0, True, None)
    return _permutation(
        [x, y], _difference, "independent", math.comb(len(x) + len(y), len(x)), seed
    )


def independent_interval(a: Sequence[float], b: Sequence[float], *, seed: int = SEED) -> Interval:
    """mean(b) - mean(a) with a two-sample bootstrap (each sample resampled on its own)."""
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    n = min(len(x), len(y))
    if n == 0:
        return _none(None, 0, "an empty sample")
    estimate = float(y.mean() - x.mean())
    if n < 2:
        return _none(estimate, n, "one run on a side: no interval")
    if float(np.ptp(x)) == 0.0 and float(np.ptp(y)) == 0.0:
        return Interval(estimate, estimate, estimate, n, "every run of each side alike", 0.0)
    low, high, se, method = _bootstrap([x, y], _difference, n, seed=seed, resamples=RESAMPLES)
    return Interval(estimate, float(low), float(high), n, method, float(se))


def cliffs_delta(a: Sequence[float], b: Sequence[float]) -> float | None:
    """P(b > a) - P(b < a) over all pairs of runs, from the Mann-Whitney U of b against a."""
    if not len(a) or not len(b):
        return None
    u = stats.mannwhitneyu(b, a, alternative="two-sided").statistic
    return float(2 * u / (len(a) * len(b)) - 1)


def rank_biserial(differences: Sequence[float]) -> float | None:
    """Matched-pairs rank-biserial correlation of paired differences (zeros left out).

    (R+ - R-) / (R+ + R-), R+ the Wilcoxon signed-rank sum of the positive differences.
    """
    d = np.asarray([v for v in differences if v != 0], dtype=np.float64)
    if len(d) == 0:
        return None if not len(differences) else 0.0
    positive = stats.wilcoxon(d, alternative="greater").statistic
    total = len(d) * (len(d) + 1) / 2
    return float(2 * positive / total - 1)


def fdr(p_values: Sequence[float | None]) -> list[float | None]:
    """Benjamini-Hochberg adjusted p-values (q) of the tests that have a p."""
    present = [p for p in p_values if p is not None]
    if not present:
        return [None for _ in p_values]
    adjusted = iter(stats.false_discovery_control(present).tolist())
    return [None if p is None else float(next(adjusted)) for p in p_values]
