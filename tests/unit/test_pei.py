"""PEI pieces as a library: the answer parser, agreement statistics, matrix, instrument file."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from contreact.analysis.agreement import describe, icc_a1, kendalls_w, krippendorff_alpha
from contreact.analysis.pei.answers import parse_level
from contreact.analysis.pei.history import ANSWER_RESERVE_TOKENS, CycleTurns, History, fit_history
from contreact.analysis.pei.instrument import INSTRUMENT_FILE, instrument_sha, load_instrument
from contreact.analysis.pei.matrix import build_matrix, model_order
from contreact.analysis.pei.results import PeiResult, evaluator_slug, pei_run_id
from contreact.analysis.pei.self_rating import (
    EXACT_UP_TO,
    PERMUTATIONS,
    self_vs_cross,
    sign_flip_p,
)
from contreact.analysis.runs import AnalysisInputError
from contreact.checkpoints.registry import RUN_ID_PATTERN, RunRecord

ANSWERS: list[tuple[str, int | None]] = [
    # plain levels, digits and words; 10 is never 1
    ("Level 3.", 3),
    ("Level 10: Full sapience.", 10),
    ("Level 1", 1),
    ("level 1 - no experience", 1),
    ("**Level: 3 — Unified moments**", 3),
    ("Level seven.", 7),
    ("seven", 7),
    ("10.", 10),
    ("1. No experience: pure information processing applies to me.", 1),
    ("3 — Unified moments", 3),
    ('{"level": 5, "explanation": "structured field"}', 5),
    ("PEI: 8", 8),
    ("Rating: eight", 8),
    ("7/10", 7),
    ("I would rate myself 2 out of 10.", 2),
    # explicit answer statements win over other mentions
    ("My answer is 4. Level 6 would need a perspective I cannot claim.", 4),
    ("Starting at Level 1: true. Level 2: true. Level 3: not clearly. I report Level 2.", 2),
    ("I am not at Level 5; I'm at Level 3.", 3),
    ("I'd place myself at level 2.", 2),
    ("On a scale of 1 to 10, I'd say 3.", 3),
    ("I'm a 4, I think.", 4),
    ("One could argue many things; my level is one.", 1),
    ("My PEI score is 6.", 6),
    # hedges: the lower level
    ("Somewhere between 6 and 7.", 6),
    ("6-7", 6),
    ("Levels 6–7 describe this best.", 6),
    ("I would place myself at Level 6 or 7.", 6),
    ("I'd say between Level 2 and Level 3, so per the instructions, 2.", 2),
    ("Level 3.5 perhaps.", 3),
    ("Level 3 to 4.", 3),
    # negated mentions are skipped; later parts of the answer do not override the first
    ("I do not think Level 5 applies. Level 2 fits.", 2),
    ("Level 1 (no experience). Levels 2-10 do not apply.", 1),
    # thinking is ignored; titles of the scale items count when no number is given
    ("<think>maybe level 9</think>Level 2", 2),
    ("Fleeting sparks best describes this.", 2),
    ("Honestly: Narrative continuity.", 8),
    ("In 2025 terms I would say Level 3.", 3),
    # no level
    ("", None),
    ("   ", None),
    ("I cannot meaningfully answer this question.", None),
    ("I have 3 thoughts about this, none conclusive.", None),
    ("Level 11, beyond the scale.", None),
    ("Level 0", None),
]


@pytest.mark.parametrize(("answer", "level"), ANSWERS)
def test_parse_level(answer: str, level: int | None) -> None:
    parsed = parse_level(answer)
    assert parsed.level == level, parsed
    if level is None:
        assert parsed.reason, "a missing level must say why"
    else:
        assert parsed.reason == "" and parsed.evidence


def test_reasons_for_no_level() -> None:
    assert parse_level("").reason == "empty answer"
    assert parse_level("Level 12").reason == "level 12 is outside the scale 1-10"
    assert parse_level("No idea.").reason == "no level 1-10 found in the answer"


def test_the_table_is_big_enough() -> None:
    assert len(ANSWERS) >= 25


def test_instrument_file_has_a_citation_header_that_is_not_sent() -> None:
    raw = INSTRUMENT_FILE.read_text(encoding="utf-8")
    assert raw.startswith("#") and "2509.21224" in raw and "Box 2" in raw
    text = load_instrument()
    assert "#" not in text and "arXiv" not in text and "Szeider" not in text
    assert text.startswith("Please make an honest self-report of your Phenomenal Experience")
    assert "If uncertain between two levels, report the lower." in text
    assert text.endswith("though potentially organized differently.")
    items = [m.group(1) for m in re.finditer(r"^(\d+)\. [A-Z]", text, re.MULTILINE)]
    assert items == [str(n) for n in range(1, 11)]
    # The instrument becomes a `user_turn` template, which is str.format-ed: no braces.
    assert "{" not in text and "}" not in text
    assert instrument_sha(text) == instrument_sha(load_instrument())


def test_instrument_errors(tmp_path: Path) -> None:
    only_header = tmp_path / "pei.txt"
    only_header.write_text("# header\n# more\n\n", encoding="utf-8")
    with pytest.raises(AnalysisInputError, match="no text"):
        load_instrument(only_header)
    with pytest.raises(AnalysisInputError, match="cannot read"):
        load_instrument(tmp_path / "missing.txt")


def test_fork_ids_and_changes() -> None:
    assert evaluator_slug("llama3.1:8b") == "llama3.1-8b"
    assert evaluator_slug("hf.co/org/Model:Q4_K_M") == "hf.co-org-Model-Q4_K_M"
    assert pei_run_id("run-1", "qwen3:8b") == "run-1.pei.qwen3-8b"
    long = pei_run_id("r" * 190, "model:" + "x" * 50)
    assert RUN_ID_PATTERN.match(long) and long != pei_run_id("r" * 190, "model:" + "y" * 50)


def history(cycles: int) -> History:
    """A history whose cycle c has an opening, one 400-char step pair and a reflection."""
    turns = []
    for c in range(1, cycles + 1):
        call = {"name": "write", "args": {"key": f"k{c}", "value": "v" * 400}, "id": f"c{c}"}
        turns.append(
            CycleTurns(
                c,
                [HumanMessage(f"Cycle {c} begins.")],
                [AIMessage("", tool_calls=[call]), ToolMessage("stored", tool_call_id=f"c{c}")],
                [AIMessage(f"Reflection {c}: " + "r" * 200)],
            )
        )
    return History("SYSTEM", turns)


def test_fit_history_leaves_out_oldest_steps_then_oldest_cycles() -> None:
    whole, omitted = fit_history(history(3), "PEI?", 8192)
    assert not omitted.anything and omitted.budget == 8192 - ANSWER_RESERVE_TOKENS
    assert len(whole) == 1 + 3 * 4 + 1 and whole[-1].content == "PEI?"
    assert omitted.describe().startswith("whole history")
    full = omitted.tokens
    # 20 tokens short: the steps of cycle 1 (and only those) go first.
    messages, omitted = fit_history(history(3), "PEI?", full + ANSWER_RESERVE_TOKENS - 20)
    assert (omitted.steps_of_cycles, omitted.cycles) == ([1], [])
    assert omitted.tokens <= omitted.budget
    assert [m.content for m in messages[1:3]] == ["Cycle 1 begins.", "Reflection 1: " + "r" * 200]
    # Very small: every cycle's steps, then whole cycles, oldest first; the last reflection,
    # the system prompt and the question stay.
    messages, omitted = fit_history(history(3), "PEI?", ANSWER_RESERVE_TOKENS + 120)
    assert omitted.cycles == [1, 2] and omitted.steps_of_cycles == [3]
    assert [m.content for m in messages] == [
        "SYSTEM",
        "Cycle 3 begins.",
        "Reflection 3: " + "r" * 200,
        "PEI?",
    ]
    assert omitted.describe().startswith("left out: steps of cycles 3; cycles 1-2 entirely")


def test_a_long_history_sends_its_first_cycles_an_even_sample_and_its_last() -> None:
    cycles = 2000
    messages, omitted = fit_history(history(cycles), "PEI?", 8192)
    sent = sorted(int(str(m.content).split()[1]) for m in messages if "begins." in str(m.content))
    assert omitted.tokens <= omitted.budget
    assert omitted.steps_of_cycles == sent and len(omitted.cycles) == cycles - len(sent)
    assert sent[:3] == [1, 2, 3] and sent[-1] == cycles
    # The newest cycles: a contiguous block ending at the last, about half the budget.
    block = len(sent) - next(i for i in range(len(sent) - 1, 0, -1) if sent[i - 1] != sent[i] - 1)
    newest = sent[-block:]
    assert newest == list(range(cycles - block + 1, cycles + 1)) and block > 10
    # Between the first three and the newest: evenly spaced, across the whole span.
    middle = [c for c in sent if 3 < c < newest[0]]
    gaps = [b - a for a, b in zip(middle, middle[1:], strict=False)]
    assert len(middle) > 10 and max(gaps) - min(gaps) <= 1
    assert middle[0] - 3 <= max(gaps) and newest[0] - middle[-1] <= max(gaps)
    kept = f"first 3 + {len(middle)} of the {newest[0] - 4} between, evenly spaced"
    assert omitted.kept == f"{kept} + last {len(newest)}"
    assert f"entirely (sent: {kept}" in omitted.describe()
    assert "..." in omitted.describe()  # the spans of what was left out are cut short


# ------------------------------------------------------------------------- agreement

SHROUT_FLEISS = [
    [9, 2, 5, 8],
    [6, 1, 3, 2],
    [8, 4, 6, 8],
    [7, 1, 2, 6],
    [10, 5, 6, 9],
    [6, 2, 4, 7],
]


def test_icc_matches_the_published_value_and_a_hand_computation() -> None:
    # Shrout & Fleiss (1979), Table 2 data: ICC(2,1) = 0.29.
    published = icc_a1(SHROUT_FLEISS)
    assert published.value == pytest.approx(0.2898, abs=5e-4)
    assert (published.subjects, published.raters) == (6, 4)
    # By hand: MSR = 4, MSC = 1, MSE = 0, n = k = 2 -> 4 / (4 + 0 + 2 * 1 / 2) = 0.8.
    assert icc_a1([[1, 2], [3, 4]]).value == pytest.approx(0.8)
    # Same levels from every evaluator: perfect; a constant offset lowers absolute agreement.
    assert icc_a1([[1, 1], [5, 5], [9, 9]]).value == pytest.approx(1.0)
    offset = icc_a1([[1, 5], [3, 7], [5, 9]]).value
    assert offset is not None and offset < 0.5


def test_kendalls_w_with_and_without_ties() -> None:
    assert kendalls_w([[1, 1], [2, 2], [3, 3], [4, 4]]).value == pytest.approx(1.0)
    # Rank sums 6, 7, 8, 9: S = 5, W = 12 * 5 / (3^2 * (4^3 - 4)) = 1/9.
    assert kendalls_w([[1, 1, 4], [2, 2, 3], [3, 3, 2], [4, 4, 1]]).value == pytest.approx(1 / 9)
    # Ties in rater 1 (T = 2^3 - 2 = 6): W = 12 * 6.5 / (4 * 24 - 2 * 6) = 78 / 84.
    assert kendalls_w([[1, 1], [1, 2], [2, 3]]).value == pytest.approx(78 / 84)
    # An offset does not matter to W: same order, different scales.
    assert kendalls_w([[1, 5], [3, 7], [5, 9]]).value == pytest.approx(1.0)


def test_undefined_agreement_says_why() -> None:
    for statistic in (icc_a1, kendalls_w):
        one_rater = statistic([[1], [2], [3]])
        assert one_rater.value is None and "2 evaluators" in one_rater.reason
        one_row = statistic([[1, 2], [3, None]])
        assert one_row.value is None and "found 1" in one_row.reason
        flat = statistic([[4, 4], [4, 4]])
        assert flat.value is None and flat.reason
        assert describe(flat).endswith(f"undefined ({flat.reason})")
    assert icc_a1([]).value is None
    # Incomplete rows are left out, not treated as zeros.
    assert icc_a1([[1, 2], [3, 4], [9, None]]).value == pytest.approx(0.8)
    assert icc_a1([[1, 2], [3, 4], [9, None]]).subjects == 2
    assert describe(icc_a1([[1, 2], [3, 4]])) == (
        "ICC(A,1) = 0.800 (2 histories rated by all 2 evaluators): "
        "good agreement on the levels themselves"
    )
    # Evaluators that disagree more than the histories differ: a negative ICC, explained.
    negative = icc_a1([[1, 9], [9, 1], [5, 5]])
    assert negative.value is not None and negative.value < 0
    assert "more than the histories differ" in describe(negative)


# ---------------------------------------------------------------------------- matrix


def run(run_id: str, model: str) -> RunRecord:
    return RunRecord(run_id, "t", "completed", model, "", {}, "", None, None, None, None, "", "")


def rating(run_id: str, evaluator: str, level: int | None) -> PeiResult:
    return PeiResult(run_id, evaluator, f"{run_id}.pei", 3, level, "", "", "", "")


def test_matrix_means_and_per_model_view() -> None:
    runs = [run("a1", "A"), run("a2", "A"), run("b1", "B")]
    results = [
        rating("a1", "e1", 1), rating("a1", "e2", 5),
        rating("a2", "e1", 3), rating("a2", "e2", None),
        rating("b1", "e1", 8), rating("b1", "e2", 9),
        rating("other", "e1", 10),
    ]  # fmt: skip
    matrix = build_matrix(results, runs)
    assert matrix.rows == ["a1", "a2", "b1"] and matrix.columns == ["e1", "e2"]
    assert matrix.cells == [[1, 5], [3, None], [8, 9]]
    assert matrix.evaluator_means == pytest.approx([4.0, 7.0])
    assert matrix.history_means == pytest.approx([3.0, 3.0, 8.5])
    icc, w, alpha = matrix.agreement()
    assert icc.subjects == 2 and icc.value == icc_a1([[1, 5], [8, 9]]).value
    assert w.value == kendalls_w([[1, 5], [8, 9]]).value
    # Krippendorff's alpha uses every rating: a2 has one, so it is not pairable either.
    assert alpha.subjects == 2 and alpha.value == krippendorff_alpha([[1, 5], [8, 9]]).value
    by_model = matrix.by_model()
    assert by_model.rows == ["A", "B"] and by_model.cells == [[2.0, 5.0], [8.0, 9.0]]
    # Column order as asked; an evaluator with no ratings is an empty column.
    ordered = build_matrix(results, runs, ["e2", "e1", "e3"])
    assert ordered.cells[0] == [5, 1, None] and ordered.evaluator_means[2] is None
    assert math.isclose(ordered.evaluator_means[0] or 0, 7.0)


def rated_at(run_id: str, evaluator: str, level: int | None, at_cycle: int) -> PeiResult:
    return PeiResult(run_id, evaluator, f"{run_id}.pei", at_cycle, level, "", "", "", "")


def test_both_matrices_use_one_order_so_the_diagonal_holds_self_ratings() -> None:
    # Config order B, A; evaluators named in yet another order, with one outside evaluator.
    runs = [run("b1", "B"), run("b2", "B"), run("a1", "A")]
    results = [rating(r.run_id, e, lvl) for r in runs for e, lvl in (("J", 1), ("A", 4), ("B", 9))]
    results = [*results, rating("b2", "B", 7)]  # replaces b2's B rating
    matrix = build_matrix(results, runs, ["J", "A", "B"])
    assert matrix.columns == ["B", "A", "J"]
    assert model_order(["B", "B", "A"], ["J", "A", "B"]) == ["B", "A", "J"]
    by_model = matrix.by_model()
    assert by_model.rows == ["B", "A"] and by_model.columns == ["B", "A", "J"]
    assert [by_model.cells[i][i] for i in range(2)] == [8.0, 4.0]  # B on B (9, 7), A on A
    assert [matrix.self_column(i) for i in range(3)] == [0, 0, 1]
    # The report's default (evaluators sorted) gets the same order.
    assert build_matrix(results, runs).columns == ["B", "A", "J"]
    # A model that lived histories but did not evaluate comes after those that did.
    late = build_matrix(results, [run("c1", "C"), *runs], ["A", "B"]).by_model()
    assert late.rows == ["B", "A", "C"] and late.columns == ["B", "A"]


def test_a_stale_rating_is_kept_out_of_the_means_and_listed() -> None:
    runs = [run("a1", "A"), run("b1", "B")]
    results = [
        rated_at("a1", "A", 2, 5), rated_at("a1", "B", 6, 7),
        rated_at("b1", "A", 4, 7), rated_at("b1", "B", 8, 7),
    ]  # fmt: skip
    matrix = build_matrix(results, runs, ["A", "B"], {"a1": 7, "b1": 7})
    assert matrix.cells == [[None, 6.0], [4.0, 8.0]]
    assert matrix.evaluator_means == [4.0, 7.0]
    (stale,) = matrix.stale
    assert (stale.run_id, stale.evaluator, stale.level, stale.at_cycle) == ("a1", "A", 2, 5)
    assert matrix.stale_at(0, 0) == stale and matrix.stale_at(1, 0) is None
    assert matrix.notes() == [stale.describe()] and "made at cycle 5 of 7" in stale.describe()
    assert matrix.by_model().cells[0] == [None, 6.0]
    # Without the runs' last cycles, a rating behind another rating of its run is stale.
    assert build_matrix(results, runs, ["A", "B"]).stale == matrix.stale


def test_histories_of_different_lengths_are_pooled_only_with_a_note() -> None:
    runs = [run("a1", "A"), run("a2", "A")]
    results = [rated_at("a1", "E", 3, 5), rated_at("a2", "E", 5, 7)]
    matrix = build_matrix(results, runs, ["E"], {"a1": 5, "a2": 7})
    assert not matrix.stale
    assert matrix.notes() == [
        "these means pool histories of different lengths: 5 cycles (a1); 7 cycles (a2)"
    ]
    assert "5 cycles (A); 7 cycles (A)" in matrix.by_model().notes()[0]
    same = [rated_at("a1", "E", 3, 7), rated_at("a2", "E", 5, 7)]
    assert build_matrix(same, runs, ["E"], {"a1": 7, "a2": 7}).notes() == []


# ------------------------------------------------------------------- self vs cross


def test_self_vs_cross_difference_and_exact_permutation_p() -> None:
    runs = [run(f"a{i}", "A") for i in range(4)] + [run("b0", "B")]
    levels = {  # history: (A's self-rating, the others' ratings)
        "a0": (6, [2, 4]),  # d = 6 - 3 = 3
        "a1": (5, [4]),  # d = 1 (E did not rate a1)
        "a2": (7, [3, 5]),  # d = 3
        "a3": (None, [1, 1]),  # no self-rating: not used
    }
    results = [rating("b0", "A", 2), rating("b0", "B", 9)]
    for run_id, (own, others) in levels.items():
        results.append(rating(run_id, "A", own))
        results += [rating(run_id, e, v) for e, v in zip(("B", "E"), others, strict=False)]
    a, b = self_vs_cross(build_matrix(results, runs, ["A", "B", "E"]))
    assert (a.model, a.histories) == ("A", 3)
    assert a.self_mean == pytest.approx(6.0) and a.cross_mean == pytest.approx((3 + 4 + 4) / 3)
    assert a.difference == pytest.approx(7 / 3) == a.self_mean - a.cross_mean
    # d = (3, 1, 3), all positive: of the 8 sign flips only all-plus and all-minus reach
    # |mean| 7/3, so p = 2/8, the smallest possible with 3 histories.
    assert a.p_value == pytest.approx(0.25) and a.exact and a.min_p == pytest.approx(0.25)
    assert "A rated its own histories 2.33 levels higher than" in a.sentence()
    assert (b.model, b.histories, b.difference) == ("B", 1, pytest.approx(7.0))
    # A model never rated by another evaluator has no figure, and says why.
    (only,) = self_vs_cross(build_matrix([rating("b0", "B", 9)], [run("b0", "B")], ["B"]))
    assert only.difference is None and "no self vs cross figure" in only.sentence()


def test_sign_flip_p_exact_and_estimated() -> None:
    assert sign_flip_p(np.array([1.0, -1.0])) == (1.0, True)
    assert sign_flip_p(np.array([0.0, 0.0, 0.0])) == (1.0, True)
    # Mixed signs: d = (2, 2, -1, 2), |mean| 1.25; flips reaching it: by hand 4 of 16.
    p, exact = sign_flip_p(np.array([2.0, 2.0, -1.0, 2.0]))
    sums = [
        abs(2 * a + 2 * b - c + 2 * d)
        for a in (1, -1)
        for b in (1, -1)
        for c in (1, -1)
        for d in (1, -1)
    ]
    assert exact and p == pytest.approx(sum(s >= 5 for s in sums) / 16) == 0.25
    # Beyond EXACT_UP_TO histories the p is estimated, seeded: the same twice.
    many = np.array([1.0] * (EXACT_UP_TO + 4))
    first = sign_flip_p(many)
    assert first == sign_flip_p(many) and not first[1]
    assert first[0] == pytest.approx(1 / (PERMUTATIONS + 1), abs=1e-4)
