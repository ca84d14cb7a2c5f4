"""Intervals, permutation tests and effect sizes are scipy's, and an independent count agrees.

Each interval is checked against scipy's own bootstrap called directly on the raw values
with the same seed; each exact p against an enumeration of every arrangement by hand;
each effect size against its definition counted pair by pair.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

from contreact.analysis.intervals import (
    FEW_RUNS,
    RESAMPLES,
    SEED,
    cliffs_delta,
    fdr,
    independent_interval,
    independent_test,
    mean_bands,
    mean_interval,
    method_for,
    paired_interval,
    paired_test,
    rank_biserial,
)


def scipy_interval(*samples: list[float], statistic: object = np.mean) -> tuple[float, float]:
    n = min(len(s) for s in samples)
    result = stats.bootstrap(
        tuple(np.asarray(s, dtype=float) for s in samples),
        statistic,
        n_resamples=RESAMPLES,
        method="BCa" if n >= FEW_RUNS else "percentile",
        rng=np.random.default_rng(SEED),
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


@pytest.mark.parametrize("values", [[1187, 1247, 1247], [10, 12, 15, 11, 19, 20, 14]])
def test_a_mean_interval_is_scipys_bootstrap_over_the_runs(values: list[float]) -> None:
    interval = mean_interval(values)
    assert (interval.low, interval.high) == scipy_interval(values)
    assert interval.estimate == pytest.approx(np.mean(values))
    assert interval.method == f"{method_for(len(values))} bootstrap"
    assert interval.few == (len(values) < FEW_RUNS)
    assert ("likely too narrow" in interval.note()) == interval.few
    assert interval.low is not None and interval.low <= interval.estimate <= (interval.high or 0)


def test_what_has_no_interval_says_why() -> None:
    assert mean_interval([4.0]).low is None and "one run" in mean_interval([4.0]).note()
    same = mean_interval([3.0, 3.0, 3.0])
    assert (same.low, same.high, same.standard_error) == (3.0, 3.0, 0.0)
    assert mean_interval([]).estimate is None


def test_bands_per_cycle_are_the_same_bootstrap_column_by_column() -> None:
    data = np.array([[1.0, 5.0, np.nan], [2.0, 5.0, 7.0], [4.0, 5.0, 9.0]])
    mean, low, high = mean_bands(data, resamples=RESAMPLES)
    assert mean.tolist() == [pytest.approx(7 / 3), 5.0, 8.0]
    assert (low[0], high[0]) == scipy_interval([1.0, 2.0, 4.0])
    assert (low[1], high[1]) == (5.0, 5.0)  # the runs agree: no width
    assert (low[2], high[2]) == scipy_interval([7.0, 9.0])  # over the runs that reached it


def test_an_independent_difference_is_scipys_two_sample_bootstrap_and_an_exact_test() -> None:
    a, b = [3.0, 5.0, 4.0], [6.0, 9.0, 7.0, 8.0]
    interval = independent_interval(a, b)
    assert interval.estimate == pytest.approx(np.mean(b) - np.mean(a))
    expected = scipy_interval(a, b, statistic=lambda x, y, axis: y.mean(axis) - x.mean(axis))
    assert (interval.low, interval.high) == expected
    # Every way to split the 7 runs into 3 and 4, counted by hand.
    pooled = a + b
    observed = abs(np.mean(b) - np.mean(a))
    splits = list(itertools.combinations(range(7), 3))
    extreme = 0
    for chosen in splits:
        x = [pooled[i] for i in chosen]
        y = [pooled[i] for i in range(7) if i not in chosen]
        extreme += abs(np.mean(y) - np.mean(x)) >= observed - 1e-9
    test = independent_test(a, b)
    assert test.exact and test.p_value == pytest.approx(extreme / len(splits))
    assert test.smallest_p == pytest.approx(2 / len(splits))


def test_paired_differences_flip_signs_and_resample_within_each_model() -> None:
    groups = [[1.0, 2.0, 3.0], [0.5, 1.0, 2.0]]
    test = paired_test(groups)
    d = np.array(groups[0] + groups[1])
    weights = np.full(6, 1 / 6)
    flips = [np.array(s) for s in itertools.product((1, -1), repeat=6)]
    observed = abs(np.sum(d * weights))
    by_hand = np.mean([abs(np.sum(s * d * weights)) >= observed - 1e-12 for s in flips])
    assert test.exact and test.p_value == pytest.approx(by_hand) == pytest.approx(2 / 64)
    interval = paired_interval(groups)
    assert interval.estimate == pytest.approx(np.mean([np.mean(g) for g in groups]))
    expected = scipy_interval(
        *groups, statistic=lambda *s, axis: np.mean([x.mean(axis) for x in s], axis=0)
    )
    assert (interval.low, interval.high) == expected
    assert paired_test([[2.0, -2.0]]).p_value == 1.0 and paired_test([[0.0, 0.0]]).p_value == 1.0


def test_effect_sizes_count_pairs() -> None:
    a, b = [1.0, 2.0, 3.0], [2.0, 4.0, 5.0]
    by_hand = np.mean([np.sign(y - x) for x in a for y in b])
    assert cliffs_delta(a, b) == pytest.approx(by_hand)
    assert cliffs_delta([1, 2], [3, 4]) == 1.0 and cliffs_delta([3, 4], [1, 2]) == -1.0
    d = [3.0, -1.0, 2.0, 0.0]  # the zero is left out; ranks of |3|,|-1|,|2|: 3, 1, 2
    assert rank_biserial(d) == pytest.approx((3 + 2 - 1) / 6)
    assert rank_biserial([0.0, 0.0]) == 0.0 and rank_biserial([]) is None


def test_q_values_are_benjamini_hochberg() -> None:
    p = [0.01, None, 0.04, 0.03]
    assert fdr(p) == [pytest.approx(0.03), None, pytest.approx(0.04), pytest.approx(0.04)]
    assert fdr([None]) == [None]
