"""Ollama embeddings of texts (`/api/embed`), each text embedded once per process.

The similarity monitor compares each reflection with earlier ones; earlier reflections
never change, so their vectors are cached per (host, model, text) in this process: each
cycle then embeds one new text instead of the run's whole history.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence

from contreact.ollama.credentials import ollama_auth

_CACHE_LIMIT = 4096
_cache: OrderedDict[tuple[str, str, str], list[float]] = OrderedDict()
_cache_lock = threading.Lock()


def embed(texts: Sequence[str], *, model: str, host: str, timeout_s: float) -> list[list[float]]:
    """Ollama embeddings of `texts`, one request for those not embedded before.

    Earlier reflections never change, so their vectors are cached per (host, model, text)
    in this process: each cycle then embeds one new text instead of the run's whole
    history, which would grow quadratically over a long run.

    Raises:
        Exception: Whatever the client raises (unreachable host, unknown model, ...).
    """
    keys = [(host, model, t) for t in texts]
    with _cache_lock:
        known = {k: _cache[k] for k in keys if k in _cache}
    missing = list(dict.fromkeys(k for k in keys if k not in known))
    if missing:
        from langchain_ollama import OllamaEmbeddings

        embedder = OllamaEmbeddings(
            model=model, base_url=host, client_kwargs={"timeout": timeout_s, "auth": ollama_auth()}
        )
        vectors = embedder.embed_documents([k[2] for k in missing])
        if len(vectors) != len(missing):
            raise ValueError(f"asked for {len(missing)} embeddings, got {len(vectors)}")
        with _cache_lock:
            for key, vector in zip(missing, vectors, strict=True):
                known[key] = list(vector)
                _cache[key] = known[key]
            while len(_cache) > _CACHE_LIMIT:
                _cache.popitem(last=False)
    return [known[k] for k in keys]
