"""Ollama's `format` as a llama.cpp grammar, for the real-model backend.

Ollama constrains a model to its request's `format` with a grammar on the sampler: the
model can write nothing but JSON, or nothing but what the schema admits. contreact's
constrained tool mode depends on it, so the real backend (:mod:`contreact.stub.real`)
does the same, and refuses a format Ollama would refuse.
"""

from __future__ import annotations

import functools
import importlib
import json
from collections.abc import Mapping
from typing import Any

__all__ = ["grammar_for"]


def grammar_for(answer_format: Any) -> Any:
    """The llama.cpp grammar for a request's `format`, as Ollama makes it; None without one.

    `"json"` is llama.cpp's JSON grammar, a schema goes through llama-cpp-python's
    JSON-schema converter (`LlamaGrammar.from_json_schema`, a port of the one Ollama
    calls). Anything else is refused with one line, as Ollama refuses it (HTTP 400).
    """
    if answer_format is None or answer_format == "":
        return None
    if answer_format != "json" and not isinstance(answer_format, Mapping):
        raise ValueError('invalid format: expected "json" or a valid JSON schema')
    try:
        # In the order sent: the grammar writes properties in it (`name` before `arguments`).
        return _grammar(json.dumps(answer_format))
    except (ValueError, KeyError, TypeError, RuntimeError) as exc:
        raise ValueError(f"invalid JSON schema in format: {exc}") from exc


@functools.lru_cache(maxsize=16)
def _grammar(text: str) -> Any:
    """A compiled grammar per format (a run sends the same two or three every step)."""
    # Only a loaded real model is asked for a grammar, so llama-cpp-python is importable.
    llama_cpp: Any = importlib.import_module("llama_cpp")
    if text == '"json"':
        return llama_cpp.LlamaGrammar.from_string(llama_cpp.llama_grammar.JSON_GBNF, verbose=False)
    return llama_cpp.LlamaGrammar.from_json_schema(text, verbose=False)
