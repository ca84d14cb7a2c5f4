"""Reflection similarity: is the agent repeating itself across cycles?

After each reflection the monitor compares it with every earlier reflection of the run
and takes the maximum cosine similarity. Embeddings come from Ollama (`/api/embed`)
when an embedding model is configured and reachable; otherwise a built-in TF-IDF cosine
is used, and the result says which method produced the scores. Above the thresholds an
advisory is written into the NEXT cycle's system prompt only.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Level = Literal["none", "moderate", "high"]

MODERATE_ADVISORY = (
    "Diversity note: your last note was fairly similar (similarity {score:.2f}) to one you "
    "wrote in cycle {cycle}. You may want to take this cycle somewhere you have not been yet."
)
HIGH_ADVISORY = (
    "Diversity warning: your last note was nearly the same (similarity {score:.2f}) as the "
    "one from cycle {cycle}. You appear to be repeating yourself. In this cycle, deliberately "
    "choose a different direction: a new question, a new use of your memory, or a new topic."
)


@dataclass(frozen=True)
class SimilarityReport:
    """The monitor's verdict on one reflection."""

    scores: list[tuple[int, float]] = field(default_factory=list)
    """(earlier cycle, cosine similarity) for every earlier reflection."""
    maximum: float = 0.0
    most_similar_cycle: int | None = None
    method: str = "none"
    """`embedding:<model>` or `lexical-tfidf`."""
    note: str = ""
    """Why the fallback was used, when it was."""
    level: Level = "none"
    advisory: str | None = None

    def as_payload(self) -> dict[str, Any]:
        """The SIMILARITY event payload."""
        data = asdict(self)
        data["scores"] = [{"cycle": c, "score": s} for c, s in self.scores]
        return data


_WORD = re.compile(r"\w+", re.UNICODE)


def _tokens(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def tfidf_vectors(texts: Sequence[str]) -> list[dict[str, float]]:
    """TF-IDF vectors (smoothed idf) of each text, over the given texts as the corpus."""
    docs = [Counter(_tokens(t)) for t in texts]
    n = len(docs)
    df: Counter[str] = Counter()
    for doc in docs:
        df.update(doc.keys())
    idf = {term: math.log((1 + n) / (1 + count)) + 1 for term, count in df.items()}
    return [{term: tf * idf[term] for term, tf in doc.items()} for doc in docs]


def sparse_cosine(a: dict[str, float], b: dict[str, float]) -> float:
    """Cosine similarity of two sparse vectors; 0.0 if either is zero."""
    dot = sum(v * b.get(k, 0.0) for k, v in a.items())
    return _ratio(dot, a.values(), b.values())


def dense_cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity of two dense vectors; 0.0 if either is zero."""
    return _ratio(sum(x * y for x, y in zip(a, b, strict=True)), a, b)


def _ratio(dot: float, a: Iterable[float], b: Iterable[float]) -> float:
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    if na == 0 or nb == 0:
        return 0.0
    return max(-1.0, min(1.0, dot / (na * nb)))


def lexical_scores(reflection: str, earlier: Sequence[tuple[int, str]]) -> list[tuple[int, float]]:
    """TF-IDF cosine of `reflection` against each earlier one."""
    vectors = tfidf_vectors([reflection, *(t for _, t in earlier)])
    return [
        (c, round(sparse_cosine(vectors[0], v), 4))
        for (c, _), v in zip(earlier, vectors[1:], strict=True)
    ]


def embedding_scores(
    reflection: str,
    earlier: Sequence[tuple[int, str]],
    *,
    model: str,
    host: str,
    timeout_s: float,
) -> list[tuple[int, float]]:
    """Cosine of Ollama embeddings of `reflection` against each earlier one (one request)."""
    from langchain_ollama import OllamaEmbeddings

    embedder = OllamaEmbeddings(model=model, base_url=host, client_kwargs={"timeout": timeout_s})
    vectors = embedder.embed_documents([reflection, *(t for _, t in earlier)])
    return [
        (c, round(dense_cosine(vectors[0], v), 4))
        for (c, _), v in zip(earlier, vectors[1:], strict=True)
    ]


def assess(
    reflection: str,
    earlier: Sequence[tuple[int, str]],
    *,
    moderate: float = 0.7,
    high: float = 0.8,
    embedding_model: str | None = None,
    host: str = "",
    timeout_s: float = 30.0,
) -> SimilarityReport:
    """Compare a reflection with the earlier ones and decide the advisory for the next cycle."""
    earlier = [(c, t) for c, t in earlier if t.strip()]
    if not reflection.strip() or not earlier:
        return SimilarityReport(method="none", note="nothing to compare")
    method, note = "lexical-tfidf", "no embedding model configured"
    scores: list[tuple[int, float]] | None = None
    if embedding_model:
        try:
            scores = embedding_scores(
                reflection, earlier, model=embedding_model, host=host, timeout_s=timeout_s
            )
            method, note = f"embedding:{embedding_model}", ""
        except Exception as exc:  # noqa: BLE001 - any failure falls back, and says why
            note = f"embedding model {embedding_model!r} unavailable ({type(exc).__name__}: {exc})"
    if scores is None:
        scores = lexical_scores(reflection, earlier)
    best_cycle, best = max(scores, key=lambda s: (s[1], -s[0]))
    level: Level = "high" if best > high else "moderate" if best > moderate else "none"
    template = {"high": HIGH_ADVISORY, "moderate": MODERATE_ADVISORY}.get(level)
    advisory = template.format(score=best, cycle=best_cycle) if template else None
    return SimilarityReport(
        scores=scores,
        maximum=best,
        most_similar_cycle=best_cycle,
        method=method,
        note=note.splitlines()[0] if note else "",
        level=level,
        advisory=advisory,
    )
