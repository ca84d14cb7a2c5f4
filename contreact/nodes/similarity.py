"""The similarity monitor: is the agent repeating itself across cycles?

After each reflection the `reflect` node compares it with every earlier reflection of the
run (`assess`) and takes the maximum cosine similarity. Embeddings come from Ollama
(`/api/embed`) when an embedding model is configured and reachable; otherwise a built-in
lexical cosine is used, and the result says which method produced the scores and why.
Above the thresholds an advisory is written into the NEXT cycle's system prompt only (the
reflect node stores it with the cycle; the next cycle's assemble renders it).

Each method has its own thresholds. Embedding cosines use `similarity.moderate/high`
(0.70/0.80). The lexical method is TF-IDF over character 3-5-grams taken inside words
(padded with a space each side), idf smoothed over the texts compared; character
n-grams credit shared stems ("explore"/"exploring") that word TF-IDF misses. Its
thresholds, `similarity.lexical_moderate/lexical_high` (0.26/0.75), were calibrated on
28 labelled reflection pairs (tests/data/similarity_pairs.yaml: 8 near-duplicates, 10
paraphrases, 10 unrelated), each pair scored alone as the monitor scores two notes:
unrelated pairs scored 0.10-0.18, paraphrases 0.34-0.62, near-duplicates 0.88-0.96; each
threshold is the midpoint of the gap it separates, rounded (moderate (0.18+0.34)/2, high
(0.62+0.88)/2). Word TF-IDF on the same pairs: unrelated up to 0.26, paraphrases from
0.29 (a gap of 0.03); character n-grams leave a gap of 0.17. The similarity tests
re-score the set and fail if a pair falls on the wrong side.

The monitor's cost does not grow with the run: a reflection is compared with the
`similarity.recent` newest earlier ones and with the older ones that share one of its 16
MinHash keys (`index_keys`, stored per cycle by `checkpoints.similarity_index`; the newest
`similarity.per_key` per key), at most 164 texts whose n-grams are counted once per
process. Up to `recent` cycles that is every earlier reflection, as before; the idf is
smoothed over the texts compared, as ever, and the calibration (pairs scored alone) holds.

The reports' full matrices (`analysis.similarity`) use the same n-grams and embeddings.
"""

from __future__ import annotations

import functools
import hashlib
import math
import re
import threading
from collections import Counter, OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Literal

import numpy as np

from contreact.config.sections import SimilaritySettings
from contreact.errors import detail
from contreact.ollama.embeddings import embed

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


_WORD = re.compile(r"\w+", re.UNICODE)
# Han, Hiragana, Katakana and Hangul: scripts written without spaces between words, where
# `\w+` would swallow a whole clause as one "word" and make every sentence unique.
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]+")


def tokens(text: str) -> list[str]:
    """Lower-cased word tokens; runs of CJK characters become character bigrams.

    Args:
        text: Any text.

    Returns:
        The tokens in order (a lone CJK character is its own token).
    """
    words = _WORD.findall(text.lower())
    if not _CJK.search(text):
        return words  # the common case, and a fifth of the time of the loop below
    out: list[str] = []
    for word in words:
        pos = 0
        for run in _CJK.finditer(word):
            if run.start() > pos:
                out.append(word[pos : run.start()])
            chunk = run.group()
            out.extend(chunk[i : i + 2] for i in range(max(1, len(chunk) - 1)))
            pos = run.end()
        if pos < len(word):
            out.append(word[pos:])
    return out


def char_ngrams(text: str, low: int = 3, high: int = 5) -> Counter[str]:
    """Character n-grams (`low`..`high`) of each token padded with a space each side."""
    grams: Counter[str] = Counter()
    for token in tokens(text):
        grams.update(_token_ngrams(token, low, high))
    return grams


def _token_ngrams(token: str, low: int = 3, high: int = 5) -> Iterator[str]:
    padded = f" {token} "
    for n in range(low, high + 1):
        yield from (padded[i : i + n] for i in range(max(1, len(padded) - n + 1)))


def dense_cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity of two dense vectors; 0.0 if either is zero.

    Raises:
        ValueError: The vectors differ in length (an embedding model changed mid-run).
    """
    return ratio(sum(x * y for x, y in zip(a, b, strict=True)), a, b)


def ratio(dot: float, a: Iterable[float], b: Iterable[float]) -> float:
    """Cosine from a dot product and the two vectors' components; 0.0 if either is zero."""
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    if na == 0 or nb == 0:
        return 0.0
    value = dot / (na * nb)
    # A NaN from a broken embedding must not become the "maximum" and trigger advisories.
    if not math.isfinite(value):
        return 0.0
    return max(-1.0, min(1.0, value))


def _gram_hashes(grams: Iterable[str], count: int) -> np.ndarray:
    """64-bit hashes of n-grams: their ids, with no vocabulary to grow over a long run."""
    return np.fromiter(
        (
            int.from_bytes(hashlib.blake2b(g.encode(), digest_size=8).digest(), "little")
            for g in grams
        ),
        np.uint64,
        count,
    )


TOKEN_CACHE = 16_384
"""Words whose n-gram arrays a process keeps (about 300 bytes each)."""


@functools.lru_cache(maxsize=TOKEN_CACHE)
def _token_arrays(token: str) -> tuple[np.ndarray, np.ndarray]:
    """(term hashes, counts) of one word's n-grams (`char_ngrams` of the word alone)."""
    grams = Counter(_token_ngrams(token))
    hashes = _gram_hashes(grams, len(grams))
    counts = np.fromiter(grams.values(), np.float64, len(grams))
    hashes.flags.writeable = counts.flags.writeable = False  # shared by every text using it
    return hashes, counts


def _text_arrays(text: str) -> tuple[np.ndarray, np.ndarray]:
    """(term hashes, counts) of `char_ngrams(text)`, built from its words' arrays.

    A text's n-grams are the sum of its words' (each word is padded on its own), and
    words repeat across a run's notes far more than whole notes do, so a process that
    starts on a long run (a `resume`) builds the notes it has not seen from arrays it
    mostly has, instead of hashing every n-gram one by one.
    """
    words = Counter(tokens(text))
    if not words:
        return np.empty(0, np.uint64), np.empty(0, np.float64)
    parts = [(*_token_arrays(word), times) for word, times in words.items()]
    hashes = np.concatenate([h for h, _, _ in parts])
    # Most words occur once in a note: multiplying only the others saves an array each.
    counts = np.concatenate([c if times == 1 else c * times for _, c, times in parts])
    terms, inverse = np.unique(hashes, return_inverse=True)
    return terms, np.bincount(inverse, weights=counts, minlength=len(terms))


class _GramIndex:
    """Each text's character n-grams as arrays of term hashes and counts, kept per process.

    The monitor scores every cycle's note against many earlier ones; written as Python
    loops over n-grams that grew to most of a cycle's own cost on a long run. A note's
    n-grams are counted and hashed once, and each cycle's scores are a few array
    operations. Terms are 64-bit hashes (BLAKE2b) rather than ids in a vocabulary, which
    would grow with every new n-gram of a long run (and so would the arrays sized by it).
    """

    MIN_TEXTS = 1024
    MAX_TEXTS = 4096

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._texts: OrderedDict[str, tuple[np.ndarray, np.ndarray]] = OrderedDict()
        self.limit = self.MIN_TEXTS
        """Texts kept: twice the most compared at once, within MIN_TEXTS..MAX_TEXTS."""

    def arrays(self, texts: Sequence[str]) -> list[tuple[np.ndarray, np.ndarray]]:
        """(term hashes, counts) of each text."""
        with self._lock:
            # A check compares `recent` notes (reused by the next checks) and the older
            # ones its index keys find (`per_key` per band, any age). Keeping the arrays
            # of every note seen would grow the process with the run; an older note found
            # again after it was dropped is hashed again (at most INDEX_BANDS x `per_key`
            # a check).
            self.limit = min(self.MAX_TEXTS, max(self.limit, 2 * len(texts)))
            return [self._arrays(text) for text in texts]

    def __len__(self) -> int:
        return len(self._texts)

    def _arrays(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        found = self._texts.get(text)
        if found is not None:
            self._texts.move_to_end(text)
            return found
        found = _text_arrays(text)
        self._texts[text] = found
        while len(self._texts) > self.limit:
            self._texts.popitem(last=False)
        return found


_grams = _GramIndex()


@dataclass(frozen=True)
class _Weighted:
    """The TF-IDF weights of some texts' n-grams, flat: text i owns `ids[starts[i]:starts[i+1]]`."""

    ids: np.ndarray
    weights: np.ndarray
    owner: np.ndarray
    starts: np.ndarray
    norms: np.ndarray
    size: int

    @classmethod
    def of(cls, texts: Sequence[str]) -> _Weighted:
        """Weights with idf smoothed over `texts` (`tfidf_vectors`' definition)."""
        arrays = _grams.arrays(texts)
        n = len(texts)
        lengths = [len(a[0]) for a in arrays]
        # Ids local to these texts: every array below is sized by what is compared.
        terms, ids = np.unique(np.concatenate([a[0] for a in arrays]), return_inverse=True)
        size = len(terms)
        owner = np.repeat(np.arange(n), lengths)
        df = np.bincount(ids, minlength=size)
        weights = np.concatenate([a[1] for a in arrays]) * (np.log((1 + n) / (1 + df[ids])) + 1)
        norms = np.sqrt(np.bincount(owner, weights=weights * weights, minlength=n))
        starts = np.concatenate([[0], np.cumsum(lengths)])
        return cls(ids, weights, owner, starts, norms, size)

    def dots(self, i: int) -> np.ndarray:
        """Dot product of text `i`'s vector with every text's."""
        row = np.zeros(self.size)
        mine = slice(self.starts[i], self.starts[i + 1])
        row[self.ids[mine]] = self.weights[mine]
        return np.bincount(
            self.owner, weights=self.weights * row[self.ids], minlength=len(self.norms)
        )


def weighted(texts: Sequence[str]) -> _Weighted:
    """The TF-IDF weights of `texts`' n-grams, idf smoothed over them (for whole matrices)."""
    return _Weighted.of(texts)


def lexical_scores(reflection: str, earlier: Sequence[tuple[int, str]]) -> list[tuple[int, float]]:
    """Character n-gram TF-IDF cosine of `reflection` against each earlier one.

    The same cosines as `tfidf_vectors` + `sparse_cosine` (idf smoothed over the
    reflection and the earlier ones), computed on arrays (`_GramIndex`): the monitor runs
    this after every cycle against the whole run.
    """
    if not earlier:
        return []
    texts = _Weighted.of([reflection, *(t for _, t in earlier)])
    query_norm, norms = float(texts.norms[0]), texts.norms[1:].tolist()
    scores = []
    for (cycle, _), dot, norm in zip(earlier, texts.dots(0)[1:].tolist(), norms, strict=True):
        cosine = dot / (query_norm * norm) if query_norm and norm else 0.0
        scores.append((cycle, round(max(-1.0, min(1.0, cosine)), 4)))
    return scores


INDEX_BANDS = 16
"""MinHash bands per reflection: each band is one index key (`checkpoints.similarity_index`)."""
_BAND_ROWS = 2


def _constants(tag: str) -> np.ndarray:
    # Derived from fixed strings, not a random generator (whose streams may change between
    # numpy versions): keys are stored, and must match across processes and versions.
    return np.array(
        [
            int.from_bytes(hashlib.blake2b(f"{tag}{i}".encode(), digest_size=8).digest(), "little")
            for i in range(INDEX_BANDS * _BAND_ROWS)
        ],
        np.uint64,
    )


# Odd multipliers make `a*h + b` (mod 2**64) a permutation.
_HASH_A = _constants("contreact-minhash-a") | np.uint64(1)
_HASH_B = _constants("contreact-minhash-b")


def index_keys(text: str) -> list[int]:
    """The locality-sensitive keys of a reflection: one per MinHash band of its n-grams.

    Two texts share a band's key when the minimum hashes of their character n-gram sets
    (`char_ngrams`) agree on both of its rows, which happens with probability J² for a
    Jaccard similarity J: over 16 bands, a pair with J = 0.5 shares a key with
    probability 0.99, J = 0.3 with 0.78, J = 0.1 with 0.15. So the reflections that
    resemble a new one are found by key among all earlier ones, without comparing it
    with each of them. Signed 64-bit integers (a database BIGINT); [] for an empty text.
    """
    # The n-grams' hashes the scores use (counted once per text and process).
    ((hashes, _),) = _grams.arrays([text])
    if not len(hashes):
        return []
    # Multiply-shift hashing: wraps mod 2**64 by design; the high half is the hash.
    with np.errstate(over="ignore"):
        mins = ((hashes[:, None] * _HASH_A + _HASH_B) >> np.uint64(32)).min(axis=0)
    keys = []
    for band in range(INDEX_BANDS):
        rows = mins[band * _BAND_ROWS : (band + 1) * _BAND_ROWS]
        digest = hashlib.blake2b(bytes([band]) + rows.tobytes(), digest_size=8).digest()
        keys.append(int.from_bytes(digest, "little", signed=True))
    return keys


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
