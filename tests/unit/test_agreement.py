"""The agreement statistics equal the libraries', and test-retest is agreement over repeats.

ICC(A,1) and its interval and Kendall's W against pingouin, Krippendorff's alpha against
the krippendorff package.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pingouin
import pytest
from scipy import stats

from contreact.analysis.agreement import icc_a1, kendalls_w, krippendorff_alpha
from contreact.analysis.intervals import SEED
from contreact.analysis.pei.results import PeiResult
from contreact.analysis.pei.retest import self_consistency

# Shrout & Fleiss (1979), Table 2: 6 targets rated by 4 judges.
SHROUT_FLEISS = [
    [9, 2, 5, 8],
    [6, 1, 3, 2],
    [8, 4, 6, 8],
    [7, 1, 2, 6],
    [10, 5, 6, 9],
    [6, 2, 4, 7],
]
TIED = [[1, 1, 4], [2, 2, 3], [3, 3, 2], [4, 4, 1], [2, 3, 3], [5, 1, 1]]


def long_form(matrix: list[list[float]]) -> pd.DataFrame:
    wide = pd.DataFrame(matrix).reset_index().rename(columns={"index": "subject"})
    return wide.melt(id_vars="subject", var_name="rater", value_name="rating")


@pytest.mark.parametrize("matrix", [SHROUT_FLEISS, TIED, [[1, 2], [3, 4], [6, 5], [2, 2]]])
def test_icc_and_its_interval_equal_pingouins(matrix: list[list[float]]) -> None:
    ours = icc_a1(matrix)
    table = pingouin.intraclass_corr(long_form(matrix), "subject", "rater", "rating")
    theirs = table.set_index("Type").loc["ICC(A,1)"]
    assert ours.value == pytest.approx(theirs["ICC"])
    low, high = theirs["CI95"]
    # pingouin rounds its interval to two decimals.
    assert (ours.low, ours.high) == (pytest.approx(low, abs=0.005), pytest.approx(high, abs=0.005))
    assert ours.interval_text() == f"[{low:.2f}, {high:.2f}]"


@pytest.mark.parametrize("matrix", [SHROUT_FLEISS, TIED])
def test_kendalls_w_equals_pingouins_friedman_w(matrix: list[list[float]]) -> None:
    # Kendall's W of raters ranking subjects: Friedman's W with raters as the blocks.
    raters_by_subjects = pd.DataFrame(np.asarray(matrix, dtype=float).T)
    theirs = pingouin.friedman(raters_by_subjects)["W"].iloc[0]
    assert kendalls_w(matrix).value == pytest.approx(theirs)
    chi2 = stats.friedmanchisquare(*np.asarray(matrix, dtype=float)).statistic
    raters = len(matrix[0])
    assert kendalls_w(matrix).value == pytest.approx(chi2 / (raters * (len(matrix) - 1)))


def test_krippendorffs_alpha_is_the_packages_with_a_seeded_bootstrap() -> None:
    import krippendorff

    matrix: list[list[float | None]] = [[1, 2, None], [3, 4, 5], [9, None, 8], [2, 2, 3]]
    data = np.array([[np.nan if v is None else v for v in row] for row in matrix]).T
    expected = krippendorff.alpha(reliability_data=data, level_of_measurement="interval")
    ours = krippendorff_alpha(matrix)
    assert ours.value == pytest.approx(expected) and ours.subjects == 4
    assert ours.low is not None and ours.high is not None and ours.low <= ours.high
    assert krippendorff_alpha(matrix, seed=SEED) == ours  # seeded: the same twice
    assert krippendorff_alpha([[5, 5], [5, 5]]).reason == "all ratings are equal (no variance)"


def rating(run_id: str, evaluator: str, level: int, repeat: int) -> PeiResult:
    return PeiResult(run_id, evaluator, "f", 3, level, "", "", "", "", repeat=repeat)


def test_test_retest_is_agreement_over_one_evaluators_repeats() -> None:
    levels = {"a": (6, 6, 7), "b": (2, 3, 2), "c": (9, 9, 8), "d": (4, 5, 5)}
    results = [
        rating(run, "judge", level, k)
        for run, asked in levels.items()
        for k, level in enumerate(asked, start=1)
    ]
    results.append(rating("a", "once", 5, 1))  # asked once: no test-retest figure
    # Run e went on to cycle 4 after it was rated at cycle 3: stale, left out.
    stale = [rating("e", "judge", level, k) for k, level in ((1, 1), (2, 10), (3, 5))]
    (found,) = self_consistency([*results, *stale], {"a": 3, "b": 3, "c": 3, "d": 3, "e": 4})
    matrix = [list(asked) for asked in levels.values()]
    assert (found.evaluator, found.repeats, found.histories) == ("judge", 3, 4)
    assert found.icc.value == icc_a1(matrix).value and found.icc.value is not None
    assert found.icc.value > 0.8 and found.icc.low is not None
    assert found.alpha.value == krippendorff_alpha(matrix).value
    assert "judge, asked 3 times: test-retest ICC(A,1)" in found.sentence()
    assert "the repeats disagree" not in found.sentence()
