"""The similarity monitor: is the agent repeating itself across cycles?

After each reflection the `reflect` node compares it with every earlier reflection of the
run (`assess`) and takes the maximum cosine similarity. Embeddings come from Ollama
(`/api/embed`) when an embedding model is configured and reachable; otherwise a built-in
lexical cosine is used, and the result says which method produced the scores and why.
Above the thresholds an advisory is written into the NEXT cycle's system prompt only (the
reflect node stores it with the cycle; the next cycle's assemble renders it).

Each method has its own thresholds: embedding cosines use `similarity.moderate/high`; the
lexical method (`text.similarity`, TF-IDF over character n-grams) scores lower for the same
resemblance and has its own, `similarity.lexical_moderate/lexical_high`, calibrated on the
labelled reflection pairs of tests/data/similarity_pairs.yaml (docs/research.md); the
similarity tests re-score the set and fail if a pair falls on the wrong side.

The monitor's cost does not grow with the run: a reflection is compared with the
`similarity.recent` newest earlier ones and with the older ones that share one of its
MinHash keys (`text.similarity.index_keys`, stored per cycle by
`checkpoints.similarity_index`; the newest `similarity.per_key` per key), a bounded set of
texts whose n-grams are counted once per process.

The reports' full matrices (`analysis.similarity`) use the same n-grams and embeddings.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Literal

from contreact.config.sections import SimilaritySettings
from contreact.errors import detail
from contreact.ollama.embeddings import embed
from contreact.text.similarity import dense_cosine, lexical_scores

Level = Literal["none", "moderate", "high"]

LEXICAL_METHOD = "lexical-char-tfidf"
EMBEDDING_PREFIX = "embedding:"

LOGGED_SCORES = 5
"""How many of a reflection's scores its SIMILARITY event keeps: the highest ones."""

MODERATE_ADVISORY = (
    "Similarity note: your last reflection is fairly similar (cosine {score:.2f}) to the one "
    "you wrote in cycle {cycle}. If you want variety, this cycle is a chance to explore "
    "something you have not looked at yet; staying on course is also your choice."
)
HIGH_ADVISORY = (
    "Similarity notice: your last reflection is nearly the same (cosine {score:.2f}) as the one "
    "you wrote in cycle {cycle}, so you may be repeating yourself. You are free to continue, "
    "but consider taking this cycle in a new direction: a new question, a new use of your "
    "memory, or a new topic."
)


@dataclass(frozen=True)
class SimilarityReport:
    """The monitor's verdict on one reflection."""

    scores: list[tuple[int, float]] = field(default_factory=list)
    """(earlier cycle, cosine similarity) for every earlier non-empty reflection."""
    maximum: float = 0.0
    most_similar_cycle: int | None = None
    method: str = "none"
    """`embedding:<model>`, `lexical-char-tfidf`, or `none` when there was nothing to compare."""
    note: str = ""
    """Why the lexical fallback was used, when it was (one line)."""
    level: Level = "none"
    advisory: str | None = None
    moderate: float = 0.7
    """The moderate threshold in force (a score above it is `moderate`)."""
    high: float = 0.8
    """The high threshold in force (a score above it is `high`)."""

    def as_payload(self) -> dict[str, Any]:
        """The SIMILARITY event payload: the top scores, the maximum, method, level, thresholds.

        Only the `LOGGED_SCORES` highest scores are logged (in cycle order), with the
        number of reflections compared: every score would make each cycle's event grow
        with the run, and the log (and the database) grow quadratically. The full
        matrix is recomputed from the reflections when a report needs it (`pairwise`).
        """
        # Not `asdict`: it deep-copies every score, and there is one per earlier cycle.
        data: dict[str, Any] = {f.name: getattr(self, f.name) for f in fields(self)}
        # Highest first, ties to the earliest cycle (as `maximum` is chosen); logged in cycle order.
        top = sorted(self.scores, key=lambda s: (-s[1], s[0]))[:LOGGED_SCORES]
        data["scores"] = [{"cycle": c, "score": s} for c, s in sorted(top)]
        data["compared"] = len(self.scores)
        return data


def embedding_scores(
    reflection: str,
    earlier: Sequence[tuple[int, str]],
    *,
    model: str,
    host: str,
    timeout_s: float,
) -> list[tuple[int, float]]:
    """Cosine of Ollama embeddings of `reflection` against each earlier one."""
    vectors = embed(
        [reflection, *(t for _, t in earlier)], model=model, host=host, timeout_s=timeout_s
    )
    return [
        (c, round(dense_cosine(vectors[0], v), 4))
        for (c, _), v in zip(earlier, vectors[1:], strict=True)
    ]


def embedding_failure(model: str, exc: Exception) -> str:
    """Why the embedding model could not be used (one line), for the report's note."""
    return f"embedding model {model!r} unavailable ({detail(exc)}); similarity is lexical"


EMBED_TIMEOUT_S = 30.0
"""The longest an embedding request may hold the monitor (or a report): a slow embedding
model must not stall the agent's run, whatever the run's own `ollama.timeout_s`."""

_DEFAULTS = SimilaritySettings()
_LEXICAL_DEFAULTS = (_DEFAULTS.lexical_moderate, _DEFAULTS.lexical_high)


def level_of(score: float, *, moderate: float, high: float) -> Level:
    """The advisory level of a maximum similarity (strictly above a threshold counts)."""
    if score > high:
        return "high"
    if score > moderate:
        return "moderate"
    return "none"


def assess(
    reflection: str,
    earlier: Sequence[tuple[int, str]],
    *,
    moderate: float = _DEFAULTS.moderate,
    high: float = _DEFAULTS.high,
    lexical: tuple[float, float] | None = None,
    embedding_model: str | None = None,
    host: str = "",
    timeout_s: float = EMBED_TIMEOUT_S,
) -> SimilarityReport:
    """Compare a reflection with the earlier ones and decide the advisory for the next cycle.

    Never raises for an unavailable embedding model: it falls back to TF-IDF and says why
    in `note`, because a monitoring failure must not fail the agent's run.

    Args:
        reflection: This cycle's reflection.
        earlier: `(cycle, reflection)` of the earlier cycles; empty ones are skipped.
        moderate: Above this maximum embedding similarity, the mild advisory.
        high: Above this, the strong advisory.
        lexical: `(moderate, high)` when the lexical method is in force (default: the
            calibrated `similarity.lexical_moderate/lexical_high` defaults).
        embedding_model: Ollama embedding model; None means lexical TF-IDF.
        host: Ollama base URL.
        timeout_s: Timeout of the embedding request.

    Returns:
        The scores, their maximum, the method, the level and the advisory text (or None).
    """
    earlier = [(c, t) for c, t in earlier if t.strip()]
    if not reflection.strip() or not earlier:
        note = "empty reflection" if not reflection.strip() else "no earlier reflection"
        return SimilarityReport(method="none", note=note, moderate=moderate, high=high)
    method, note = LEXICAL_METHOD, "no embedding model configured"
    scores: list[tuple[int, float]] | None = None
    if embedding_model:
        try:
            scores = embedding_scores(
                reflection, earlier, model=embedding_model, host=host, timeout_s=timeout_s
            )
            method, note = EMBEDDING_PREFIX + embedding_model, ""
        except Exception as exc:  # noqa: BLE001 - any failure falls back, and says why
            note = embedding_failure(embedding_model, exc)
    if scores is None:
        scores = lexical_scores(reflection, earlier)
        moderate, high = lexical or _LEXICAL_DEFAULTS
    # Ties go to the earliest cycle: the first time the agent said it is the reference.
    best_cycle, best = max(scores, key=lambda s: (s[1], -s[0]))
    level = level_of(best, moderate=moderate, high=high)
    template = {"high": HIGH_ADVISORY, "moderate": MODERATE_ADVISORY}.get(level)
    advisory = template.format(score=best, cycle=best_cycle) if template else None
    return SimilarityReport(
        scores=scores,
        maximum=best,
        most_similar_cycle=best_cycle,
        method=method,
        note=note,
        level=level,
        advisory=advisory,
        moderate=moderate,
        high=high,
    )
