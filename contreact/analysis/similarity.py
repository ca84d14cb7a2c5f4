"""Reflection similarity for reports: the full reflection-by-reflection matrix of a run.

A heatmap needs every pair, not the monitor's per-cycle scores (the SIMILARITY events
keep only the top few). `pairwise` computes the matrix from the reflections with the
monitor's method (`nodes.similarity`: Ollama embeddings when configured and reachable,
else character n-gram TF-IDF); `tfidf_vectors` + `sparse_cosine` are the plain-Python
reference the array scoring is tested against.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from contreact.nodes.similarity import (
    EMBED_TIMEOUT_S,
    EMBEDDING_PREFIX,
    LEXICAL_METHOD,
    embedding_failure,
)
from contreact.ollama.embeddings import embed
from contreact.text.similarity import char_ngrams, dense_cosine, ratio, weighted


@functools.lru_cache(maxsize=4096)
def _cached_ngrams(text: str) -> Counter[str]:
    # The reference scoring (`tfidf_vectors`, which the array scoring must equal) counts
    # each text once per process, as the monitor did before it moved to arrays.
    # Read only (`tfidf_vectors` never changes a Counter it is given).
    return char_ngrams(text)


def tfidf_vectors(texts: Sequence[str]) -> list[dict[str, float]]:
    """TF-IDF vectors (smoothed idf) of each text's character n-grams, over the given texts."""
    docs = [_cached_ngrams(t) for t in texts]
    idf = _idf(docs)
    return [{term: tf * idf[term] for term, tf in doc.items()} for doc in docs]


def _idf(docs: Sequence[Counter[str]]) -> dict[str, float]:
    """Smoothed inverse document frequency of every n-gram over `docs`."""
    df: Counter[str] = Counter()
    for doc in docs:
        df.update(doc.keys())
    n = len(docs)
    return {term: math.log((1 + n) / (1 + count)) + 1 for term, count in df.items()}


def sparse_cosine(a: dict[str, float], b: dict[str, float]) -> float:
    """Cosine similarity of two sparse vectors; 0.0 if either is zero."""
    if len(b) < len(a):
        a, b = b, a
    dot = sum(v * b.get(k, 0.0) for k, v in a.items())
    return ratio(dot, a.values(), b.values())


@dataclass(frozen=True)
class PairwiseSimilarity:
    """Cosine similarity of every pair of a run's reflections (for heatmaps)."""

    labels: list[int]
    """The cycle of each row/column."""
    matrix: list[list[float]]
    method: str
    note: str = ""


def pairwise(
    reflections: Sequence[tuple[int, str]],
    *,
    embedding_model: str | None = None,
    host: str = "",
    timeout_s: float = EMBED_TIMEOUT_S,
) -> PairwiseSimilarity:
    """The full similarity matrix of `(cycle, reflection)` pairs, embedding or lexical.

    An empty reflection is similar to nothing (0.0, and 0.0 on the diagonal too), so a
    heatmap shows it as a gap rather than as a repeat.

    Args:
        reflections: `(cycle, text)` in cycle order.
        embedding_model: Ollama embedding model; None means lexical TF-IDF.
        host: Ollama base URL.
        timeout_s: Timeout of the embedding request.

    Returns:
        The symmetric matrix, the method used and why the fallback was used, if it was.
    """
    labels = [c for c, _ in reflections]
    texts = [t for _, t in reflections]
    live = [i for i, t in enumerate(texts) if t.strip()]
    n = len(texts)
    matrix = [[0.0] * n for _ in range(n)]
    method, note = LEXICAL_METHOD, "no embedding model configured"

    def fill(score: Any) -> None:
        for a, i in enumerate(live):
            for b, j in enumerate(live):
                matrix[i][j] = round(score(a, b), 4)

    done = False
    if embedding_model and live:
        try:
            vectors = embed(
                [texts[i] for i in live], model=embedding_model, host=host, timeout_s=timeout_s
            )
            fill(lambda a, b: dense_cosine(vectors[a], vectors[b]))
            method, note, done = EMBEDDING_PREFIX + embedding_model, "", True
        except Exception as exc:  # noqa: BLE001 - reports fall back like the monitor does
            note = embedding_failure(embedding_model, exc)
    if not done and live:
        cosines = lexical_matrix([texts[i] for i in live])
        fill(lambda a, b: cosines[a][b])
    return PairwiseSimilarity(labels=labels, matrix=matrix, method=method, note=note)


DENSE_CELLS = 8_000_000
"""Up to this many texts x vocabulary cells (64 MB) the matrix is one dense product;
beyond, it is computed row by row in memory bounded by the n-grams themselves."""


def lexical_matrix(texts: Sequence[str]) -> list[list[float]]:
    """Character n-gram TF-IDF cosine of every pair of `texts` (idf over all of them).

    The same cosines as `tfidf_vectors` + `sparse_cosine`, on arrays: as Python loops over
    sparse vectors a long run's heatmap took seconds.
    """
    w = weighted(texts)
    n = len(texts)
    if n * w.size <= DENSE_CELLS:
        dense = np.zeros((n, w.size))
        dense[w.owner, w.ids] = w.weights
        dots = dense @ dense.T
    else:
        dots = np.array([w.dots(i) for i in range(n)])
    scale = np.outer(w.norms, w.norms)
    with np.errstate(divide="ignore", invalid="ignore"):
        cosines = np.where(scale > 0, dots / scale, 0.0)
    return np.clip(cosines, -1.0, 1.0).tolist()  # type: ignore[no-any-return]
