"""Ollama's runtime options by name and type, so a typo in `model_options` is an error.

`model_options` is passed to Ollama as `options`, and Ollama ignores what it does not
know: `num_cxt: 16384` or `temprature: 0.2` would silently run the experiment on the
defaults. The names and types are those of Ollama's `Options` (api/types.go; the same
fields as the `ollama` Python client's `ollama._types.Options`), min_p included.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any, Literal

Kind = Literal["int", "float", "bool", "strings"]

OLLAMA_OPTIONS: dict[str, Kind] = {
    # load time
    "numa": "bool",
    "num_ctx": "int",
    "num_batch": "int",
    "num_gpu": "int",
    "main_gpu": "int",
    "low_vram": "bool",
    "f16_kv": "bool",
    "logits_all": "bool",
    "vocab_only": "bool",
    "use_mmap": "bool",
    "use_mlock": "bool",
    "embedding_only": "bool",
    "num_thread": "int",
    # sampling, per request
    "num_keep": "int",
    "seed": "int",
    "num_predict": "int",
    "top_k": "int",
    "top_p": "float",
    "min_p": "float",
    "tfs_z": "float",
    "typical_p": "float",
    "repeat_last_n": "int",
    "temperature": "float",
    "repeat_penalty": "float",
    "presence_penalty": "float",
    "frequency_penalty": "float",
    "mirostat": "int",
    "mirostat_tau": "float",
    "mirostat_eta": "float",
    "penalize_newline": "bool",
    "stop": "strings",
}

_KIND_TEXT = {
    "int": "an integer",
    "float": "a number",
    "bool": "true or false",
    "strings": "a list of strings",
}


def _fits(kind: Kind, value: Any) -> bool:
    if kind == "bool":
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if kind == "int":
        return isinstance(value, int)
    if kind == "float":
        return isinstance(value, int | float)
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def check_model_options(options: Mapping[str, Any]) -> list[str]:
    """Every problem with `options`, each naming the option (and a close name for a typo).

    `null` is accepted for any option and means "not sent" (e.g. `seed: null` for an
    unseeded run).
    """
    problems = []
    for name, value in options.items():
        kind = OLLAMA_OPTIONS.get(str(name))
        if kind is None:
            close = difflib.get_close_matches(str(name), list(OLLAMA_OPTIONS), n=1, cutoff=0.6)
            hint = f" (did you mean `{close[0]}`?)" if close else ""
            problems.append(f"unknown Ollama option `{name}`{hint}")
        elif value is not None and not _fits(kind, value):
            problems.append(f"option `{name}` must be {_KIND_TEXT[kind]} (got {value!r})")
    return problems
