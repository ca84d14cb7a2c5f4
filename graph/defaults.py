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
