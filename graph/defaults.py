"""Defaults shared by the runtime Context and the YAML config, with no heavy imports."""

from __future__ import annotations

import os
from typing import Any


def default_ollama_host() -> str:
    """`OLLAMA_HOST` (scheme added if missing), else the local default."""
    host = os.environ.get("OLLAMA_HOST", "").strip() or "http://localhost:11434"
    return host if "://" in host else f"http://{host}"


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
