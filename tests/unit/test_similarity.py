"""The similarity monitor as a library: scores, levels, thresholds, fallback, embedding cache."""

from __future__ import annotations

import math

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from contreact.analysis.similarity import pairwise
from contreact.config.sections import SimilaritySettings
from contreact.nodes import similarity
from contreact.nodes.similarity import HIGH_ADVISORY, LEXICAL_METHOD, MODERATE_ADVISORY, assess
from contreact.stub import StubServer
from contreact.text.similarity import dense_cosine, lexical_scores, tokens
from support.paths import DATA

SIMILARITY_LEXICAL_MODERATE = SimilaritySettings().lexical_moderate
SIMILARITY_LEXICAL_HIGH = SimilaritySettings().lexical_high

PLAN = "Lighthouse plan: index every stored key by theme, then link related notes."
OTHER = "Drafted a haiku about tides: moon pulls water, shoreline breathes, gulls wait."


def test_cjk_text_is_split_into_bigrams() -> None:
    assert tokens("Hello 世界和平 ok") == ["hello", "世界", "界和", "和平", "ok"]
    assert tokens("猫") == ["猫"]
    # Without bigrams two sentences sharing most characters would share no token at all.
    a = assess("我今天在研究记忆的结构", [(1, "我昨天在研究记忆的结构")])
    assert a.maximum > 0.5


def test_nothing_to_compare() -> None:
    first = assess(PLAN, [])
    assert (first.method, first.level, first.advisory, first.scores) == ("none", "none", None, [])
    empty = assess("   ", [(1, PLAN)])
    assert empty.method == "none" and empty.note == "empty reflection"
    # Empty earlier reflections are skipped, not scored as 0.
    only_empty = assess(PLAN, [(1, ""), (2, " ")])
    assert only_empty.method == "none" and only_empty.scores == []


def test_high_moderate_and_none_levels_with_configurable_thresholds() -> None:
    earlier = [(1, OTHER), (2, PLAN)]
    repeat = assess(PLAN + " Again.", earlier)
    assert repeat.method == LEXICAL_METHOD and repeat.note == "no embedding model configured"
    assert [c for c, _ in repeat.scores] == [1, 2]
    assert repeat.maximum == max(s for _, s in repeat.scores) and repeat.most_similar_cycle == 2
    assert repeat.level == "high" and repeat.maximum > 0.8
    assert repeat.advisory == HIGH_ADVISORY.format(score=repeat.maximum, cycle=2)

    # The same pair under other thresholds: moderate, then nothing.
    mild = assess(PLAN + " Again.", earlier, lexical=(0.5, 0.99))
    assert mild.level == "moderate"
    assert mild.advisory == MODERATE_ADVISORY.format(score=mild.maximum, cycle=2)
    calm = assess(PLAN + " Again.", earlier, lexical=(0.99, 0.995))
    # The embedding thresholds do not apply to lexical scores.
    assert assess(PLAN + " Again.", earlier, moderate=0.99, high=0.995).level == "high"
    assert calm.level == "none" and calm.advisory is None

    # Strictly above: a score equal to the threshold does not count.
    assert similarity.level_of(0.8, moderate=0.7, high=0.8) == "moderate"
    assert similarity.level_of(0.7, moderate=0.7, high=0.8) == "none"

    different = assess(OTHER, [(1, PLAN)])
    assert different.level == "none" and different.maximum < SIMILARITY_LEXICAL_MODERATE


def test_payload_carries_the_scores_the_maximum_method_level_and_thresholds() -> None:
    report = assess(PLAN, [(1, OTHER), (2, PLAN)], lexical=(0.6, 0.9))
    payload = report.as_payload()
    assert payload["scores"] == [{"cycle": c, "score": s} for c, s in report.scores]
    assert payload["compared"] == 2
    assert payload["maximum"] == report.maximum == 1.0
    assert payload["most_similar_cycle"] == 2
    assert (payload["method"], payload["level"]) == (LEXICAL_METHOD, "high")
    assert (payload["moderate"], payload["high"]) == (0.6, 0.9)
    assert payload["advisory"] == report.advisory


def test_ties_name_the_earliest_cycle() -> None:
    report = assess(PLAN, [(3, PLAN), (5, PLAN)])
    assert report.most_similar_cycle == 3


def test_unavailable_embedding_model_falls_back_and_says_why() -> None:
    with StubServer().start() as server:
        report = assess(PLAN, [(1, PLAN)], embedding_model="no-such-embed", host=server.url)
    assert report.method == LEXICAL_METHOD
    assert "no-such-embed" in report.note and "\n" not in report.note
    assert report.level == "high"
    # Nothing listens here: connection refused, same fallback.
    refused = assess(PLAN, [(1, OTHER)], embedding_model="stub-embed", host="http://127.0.0.1:9")
    assert refused.method == LEXICAL_METHOD and "stub-embed" in refused.note


def test_embeddings_are_used_and_cached_per_text() -> None:
    with StubServer().start() as server:
        first = assess(
            PLAN, [(1, OTHER), (2, PLAN + " x")], embedding_model="stub-embed", host=server.url
        )
        second = assess(
            OTHER + " y",
            [(1, OTHER), (2, PLAN + " x"), (3, PLAN)],
            embedding_model="stub-embed",
            host=server.url,
        )
        sent = [r["body"]["input"] for r in server.requests("/api/embed")]
    assert first.method == second.method == "embedding:stub-embed" and first.note == ""
    assert first.level == "high" and first.most_similar_cycle == 2
    assert second.most_similar_cycle == 1
    # The second assessment embedded only the one text it had not seen: each cycle costs
    # one embedding, not the whole history again.
    assert sent == [[PLAN, OTHER, PLAN + " x"], [OTHER + " y"]]


def test_cosine_is_safe_on_zero_nan_and_mismatched_vectors() -> None:
    assert dense_cosine([0.0, 0.0], [1.0, 2.0]) == 0.0
    assert dense_cosine([math.nan, 1.0], [1.0, 1.0]) == 0.0
    with pytest.raises(ValueError):
        dense_cosine([1.0], [1.0, 2.0])


def test_pairwise_matrix_is_symmetric_with_gaps_for_empty_reflections() -> None:
    notes = [(1, PLAN), (2, ""), (3, PLAN + " Again."), (4, OTHER)]
    result = pairwise(notes)
    m = result.matrix
    assert result.labels == [1, 2, 3, 4] and result.method == LEXICAL_METHOD
    assert all(m[i][j] == m[j][i] for i in range(4) for j in range(4))
    assert m[0][0] == m[2][2] == m[3][3] == 1.0
    assert m[1] == [0.0] * 4 and [row[1] for row in m] == [0.0] * 4
    assert m[0][2] > 0.8 > 0.3 > m[0][3]
    with StubServer().start() as server:
        embedded = pairwise(notes, embedding_model="stub-embed", host=server.url)
    assert embedded.method == "embedding:stub-embed"
    assert embedded.matrix[0][2] > 0.8 and embedded.matrix[1][1] == 0.0


# ------------------------------------------------------------------ lexical calibration

PAIRS = yaml.safe_load((DATA / "similarity_pairs.yaml").read_text())["pairs"]
EXPECTED_LEVEL = {"near-duplicate": "high", "paraphrase": "moderate", "unrelated": "none"}


def test_the_calibration_set_is_big_enough_and_balanced() -> None:
    labels = [p["label"] for p in PAIRS]
    assert len(PAIRS) >= 20 and set(labels) == set(EXPECTED_LEVEL)
    assert min(labels.count(label) for label in EXPECTED_LEVEL) >= 6


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: f"{p['label']}:{p['a'][:24]}")
def test_lexical_monitor_levels_on_the_labelled_pairs(pair: dict[str, str]) -> None:
    """A paraphrase flags at least moderate, unrelated notes never flag."""
    report = assess(pair["b"], [(1, pair["a"])])
    assert report.method == LEXICAL_METHOD
    assert (report.moderate, report.high) == (
        SIMILARITY_LEXICAL_MODERATE,
        SIMILARITY_LEXICAL_HIGH,
    )
    expected = EXPECTED_LEVEL[pair["label"]]
    assert report.level == expected, (report.maximum, pair)


def test_lexical_thresholds_are_the_midpoints_of_the_gaps() -> None:
    """The documented calibration: each threshold halves the gap it separates."""
    scores: dict[str, list[float]] = {}
    for pair in PAIRS:
        ((_, score),) = lexical_scores(pair["b"], [(1, pair["a"])])
        scores.setdefault(pair["label"], []).append(score)
    moderate = (max(scores["unrelated"]) + min(scores["paraphrase"])) / 2
    high = (max(scores["paraphrase"]) + min(scores["near-duplicate"])) / 2
    assert SIMILARITY_LEXICAL_MODERATE == pytest.approx(moderate, abs=0.01)
    assert SIMILARITY_LEXICAL_HIGH == pytest.approx(high, abs=0.01)
    # Configured thresholds for the lexical method are used when given.
    strict = assess(PAIRS[0]["b"], [(1, PAIRS[0]["a"])], lexical=(0.97, 0.99))
    assert strict.level == "none" and (strict.moderate, strict.high) == (0.97, 0.99)


def test_payload_keeps_only_the_highest_scores_so_events_do_not_grow_with_the_run() -> None:
    """The event keeps the `LOGGED_SCORES` highest scores, and how many were compared.

    Every score in every event would grow the log quadratically.
    """
    from contreact.nodes.similarity import LOGGED_SCORES, SimilarityReport

    scores = [(c, round(0.01 * ((c * 37) % 61), 4)) for c in range(1, 41)]
    scores[20] = (21, scores[5][1])  # a tie: both kept only if both are among the top
    payload = SimilarityReport(scores=scores).as_payload()
    kept = [(e["cycle"], e["score"]) for e in payload["scores"]]
    assert len(kept) == LOGGED_SCORES == 5 and payload["compared"] == 40
    best = sorted(scores, key=lambda s: (-s[1], s[0]))[:LOGGED_SCORES]
    assert kept == sorted(best)  # the highest ones, earliest first on ties, in cycle order
    assert max(s for _, s in kept) == max(s for _, s in scores)
    assert min(s for _, s in kept) >= sorted((s for _, s in scores), reverse=True)[4]


_WORDS = st.sampled_from(
    ["memory", "explore", "exploring", "notes", "theme", "tides", "记忆", "结构", "a", "42", ""]
)


@settings(max_examples=150, deadline=None)
@given(
    reflection=st.lists(_WORDS, max_size=12).map(" ".join),
    earlier=st.lists(st.lists(_WORDS, max_size=12).map(" ".join), min_size=1, max_size=8),
)
def test_the_monitors_array_scores_equal_the_tfidf_cosines_of_the_reports(
    reflection: str, earlier: list[str]
) -> None:
    """The monitor's scores and the reports' matrix are one measure.

    `lexical_scores` (numpy, per cycle) and `tfidf_vectors` + `sparse_cosine` (reports):
    the same idf over the texts compared, the same cosine, empty texts scoring 0.
    """
    from contreact.analysis.similarity import sparse_cosine, tfidf_vectors

    vectors = tfidf_vectors([reflection, *earlier])
    expected = [round(sparse_cosine(vectors[0], v), 4) for v in vectors[1:]]
    got = lexical_scores(reflection, list(enumerate(earlier, start=1)))
    assert [c for c, _ in got] == list(range(1, len(earlier) + 1))
    assert [s for _, s in got] == pytest.approx(expected, abs=1.01e-4)


def test_array_scores_do_not_depend_on_what_else_the_process_scored() -> None:
    """Texts share one vocabulary per process; a run's scores must not see another run's."""
    earlier = [(1, PLAN), (2, OTHER)]
    alone = lexical_scores(PLAN + " Again.", earlier)
    lexical_scores("unrelated words about gardens and tides", [(1, "orchards, rain, 雨")])
    assert lexical_scores(PLAN + " Again.", earlier) == alone


@pytest.mark.parametrize("dense_cells", [8_000_000, 0], ids=["dense", "row-by-row"])
def test_the_reports_matrix_is_the_tfidf_cosine_of_every_pair(
    dense_cells: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both ways of computing a report's matrix give `sparse_cosine` of `tfidf_vectors`."""
    from contreact.analysis import similarity as reports
    from contreact.analysis.similarity import sparse_cosine, tfidf_vectors

    monkeypatch.setattr(reports, "DENSE_CELLS", dense_cells)
    texts = [PLAN, OTHER, PLAN + " Again.", "记忆的结构", "tides and gulls, again", "x"]
    vectors = tfidf_vectors(texts)
    expected = [[round(sparse_cosine(a, b), 4) for b in vectors] for a in vectors]
    got = pairwise(list(enumerate(texts, start=1))).matrix
    assert got == expected


def test_the_index_keys_of_a_labelled_pair_are_shared_as_much_as_the_pair_is_alike() -> None:
    """Older reflections are found by shared index keys: a near-duplicate always is.

    On the calibration pairs: every near-duplicate shares most of the 16 keys, every
    paraphrase at least one (so it is compared), an unrelated note none.
    """
    from contreact.text.similarity import INDEX_BANDS, index_keys

    shared: dict[str, list[int]] = {}
    for pair in PAIRS:
        a, b = index_keys(pair["a"]), index_keys(pair["b"])
        assert len(a) == len(b) == INDEX_BANDS
        shared.setdefault(pair["label"], []).append(len(set(a) & set(b)))
    assert min(shared["near-duplicate"]) >= INDEX_BANDS // 2
    assert min(shared["paraphrase"]) >= 1
    assert max(shared["unrelated"]) == 0
    # Keys are stored with the cycles: they must be the same in every process and version.
    assert index_keys("Lighthouse plan: index every stored key by theme.")[:3] == [
        9150596923037838883,
        6921850549547034354,
        -8619862480346753972,
    ]
    assert index_keys("  ") == []
