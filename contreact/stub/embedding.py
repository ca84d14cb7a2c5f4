"""The stub's embedding model and its process-stable hash.

The similarity monitor is tested without a real embedding model, so ``/api/embed``
answers with a hashed bag of words: identical texts get identical vectors, unrelated
texts land near 0. The same stable hash seeds the simulated agent's choices, which
must not change between processes (a resumed run replays the same requests).
"""

from __future__ import annotations

import hashlib
import math
import re

__all__ = ["EMBEDDING_DIM", "embed_text", "stable_int"]

EMBEDDING_DIM = 256

_WORD_RE = re.compile(r"\w+")


def stable_int(*parts: object) -> int:
    """Hash ``parts`` to an int that is the same in every process.

    Python's built-in ``hash`` is salted per process; replies must survive a restart.
    """
    raw = "\x1f".join(str(p) for p in parts).encode()
    return int.from_bytes(hashlib.sha256(raw).digest()[:8], "big")


def embed_text(text: str, dim: int = EMBEDDING_DIM) -> list[float]:
    """Embed ``text`` as a normalized, signed, hashed bag of lowercase words.

    Identical texts get identical vectors (cosine 1.0); texts with no words in common
    land near 0 because the random signs of the hashed buckets cancel out. That is all
    the similarity monitor needs to be tested without a real embedding model.

    Args:
        text: The text to embed.
        dim: Vector length.

    Returns:
        A unit-length list of ``dim`` floats.
    """
    words = _WORD_RE.findall(text.lower()) or [""]
    vec = [0.0] * dim
    for word in words:
        digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
        bucket = int.from_bytes(digest[:4], "big") % dim
        sign = 1.0 if digest[4] & 1 else -1.0
        vec[bucket] += sign
    norm = math.sqrt(sum(v * v for v in vec))
    if norm == 0.0:
        # Every word cancelled out (possible with sign hashing); fall back to one bucket
        # so the vector stays unit-length and cosine stays defined.
        vec[stable_int(text) % dim] = 1.0
        return vec
    return [v / norm for v in vec]
