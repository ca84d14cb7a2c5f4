"""Lexical similarity of texts: TF-IDF over character n-grams, and MinHash index keys.

The similarity monitor (`nodes.similarity`) and the reports' matrices
(`analysis.similarity`) score reflections with these when no embedding model is at hand.
TF-IDF over character 3-5-grams taken inside words (padded with a space each side), idf
smoothed over the texts compared: a paraphrase shares more character n-grams than words,
which separates paraphrases from unrelated notes where word TF-IDF could not (the
calibration is in docs/research.md). Runs of CJK characters become character bigrams.
A text's n-grams are counted and hashed once per process, and MinHash bands of them
(`index_keys`) find the older texts that may resemble a new one without reading them all.
"""

from __future__ import annotations

import functools
import hashlib
import math
import re
import threading
from collections import Counter, OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

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


_grams = _GramIndex()
"""The n-gram arrays of the texts this process has scored."""


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
