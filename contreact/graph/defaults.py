"""Defaults shared by the runtime Context and the YAML config, with no heavy imports."""

from __future__ import annotations

import ipaddress
import os
from typing import Any, Literal
from urllib.parse import urlsplit

DEFAULT_OLLAMA_PORT = 11434

ToolMode = Literal["auto", "native", "text"]
CheckpointPolicy = Literal["step", "cycle"]
TOOL_MODE: ToolMode = "auto"
"""`auto`: the model's capabilities (`/api/show`) decide between native and text tools."""


ReflectionFormat = Literal["text", "json"]
REFLECTION_FORMAT: ReflectionFormat = "text"
"""`text`: a cycle's final answer is its note as written; `json`: one JSON object fitting
the reflection schema (by default the paper's reflection/plan template)."""


def resolve_host(value: str | None) -> str:
    """The base URL a host setting means, read exactly as Ollama's own client reads it.

    Ollama servers are usually configured with `OLLAMA_HOST=0.0.0.0` or `127.0.0.1`: no
    scheme and no port. The `ollama` Python client (`ollama._client._parse_host`) takes a
    missing scheme as http, a missing port as 11434 (80/443 only when the scheme is given),
    `:PORT` alone as 127.0.0.1, brackets IPv6 addresses and keeps a path prefix (a proxy).
    Every place that reaches Ollama (run, resume, doctor, batch, chat) resolves through here.
    """
    text = (value or "").strip()
    port = DEFAULT_OLLAMA_PORT
    scheme, _, hostport = text.partition("://")
    if not hostport:
        scheme, hostport = "http", text
    elif scheme == "http":
        port = 80
    elif scheme == "https":
        port = 443
    split = urlsplit(f"{scheme}://{hostport}")
    host = split.hostname or "127.0.0.1"
    try:
        port = split.port or port
    except ValueError as exc:
        raise ValueError(f"host {value!r} has an invalid port") from exc
    try:
        if isinstance(ipaddress.ip_address(host), ipaddress.IPv6Address):
            host = f"[{host}]"
    except ValueError:
        pass
    path = split.path.strip("/")
    return f"{scheme}://{host}:{port}/{path}" if path else f"{scheme}://{host}:{port}"


def default_ollama_host() -> str:
    """`OLLAMA_HOST` as Ollama's client reads it, else Ollama's local default."""
    return resolve_host(os.environ.get("OLLAMA_HOST"))


def default_model_options() -> dict[str, Any]:
    """Options passed to Ollama when the config gives none."""
    return {"temperature": 0.6, "seed": 42, "num_ctx": 8192}


# Every other default of a run, used by both the YAML config (`contreact.config`) and the
# runtime Context (`graph.state`), so that a run started in Studio (Context defaults) and
# one started from a config behave alike.
DEFAULT_MODEL = "llama3.1:8b"
TIMEOUT_S = 120.0
RETRIES = 4
RETRY_BUDGET_S = 60.0
KEEP_ALIVE = "5m"
MAX_STEPS_PER_CYCLE = 10
MAX_TOOL_CALLS_PER_CYCLE = 20
MAX_NUDGES = 2
TOOL_OUTPUT_CHARS = 8000
MEMORY_VALUE_CHARS = 50_000
OUTPUT_RESERVE_TOKENS = 1024
USER_TURN = "Cycle {cycle} begins."
SIMILARITY_ENABLED = True
SIMILARITY_MODERATE = 0.7
SIMILARITY_HIGH = 0.8
# The lexical fallback's scores run lower than embeddings' (a paraphrase shares few
# character n-grams): its thresholds are calibrated on tests/data/similarity_pairs.yaml
# (see `contreact.analysis.similarity`).
SIMILARITY_LEXICAL_MODERATE = 0.26
SIMILARITY_LEXICAL_HIGH = 0.75
PEI_NUM_CTX = 32768
CHECKPOINTS: CheckpointPolicy = "cycle"
"""`cycle`: one checkpoint per cycle (and at every pause); the journal replays an unfinished
cycle's steps on resume. `step`: a checkpoint after every step (Studio time travel to any
step of a CLI run). See the README's *Persistence* for the figures behind the default."""
"""The PEI evaluator's context (`pei.num_ctx`): room for a 10-cycle paper-length history."""
