"""Native, text or constrained tools: decided once per run from the config and the model.

Many models Ollama serves (gemma3, phi4, most fine-tunes) lack the `tools` capability, and
Ollama answers a request that carries `tools` with HTTP 400 "... does not support tools".
Such a model can still call tools written as text, so contreact has two modes: `native`
(tools bound through ChatOllama) and `text` (tools described after the system prompt, calls
parsed from the answer, results sent back as user turns). A third, `constrained`, is text
mode with each answer held by Ollama's `format` to one call or the final answer
(`nodes.constrained_format`), for models too small to write a call unaided; it is only
ever configured. Config `tools: auto` asks `/api/show` once at the run's first step; the
decision is journaled and kept in state, because the prompt depends on it and a replay
must be byte-identical.
"""

from __future__ import annotations

from typing import Any, Literal

import httpx

from contreact.ollama.credentials import ollama_auth

Mode = Literal["native", "text", "constrained"]

TEXT_MODES = frozenset({"text", "constrained"})
"""The modes that describe the tools in the system prompt and parse calls from the text."""


def model_capabilities(host: str, model: str, timeout_s: float) -> list[str] | None:
    """The model's `capabilities` from `/api/show`; None when the server cannot tell."""
    try:
        # A plain-http server has no certificate: the CA bundle need not be loaded.
        reply = httpx.post(
            f"{host.rstrip('/')}/api/show",
            json={"model": model},
            timeout=min(timeout_s, 30.0),
            verify=not host.startswith("http://"),
            auth=ollama_auth(),
        )
        if reply.status_code != 200:
            return None
        caps = reply.json().get("capabilities")
    except (httpx.HTTPError, ValueError, AttributeError):
        return None
    return [str(c) for c in caps] if isinstance(caps, list) else None


def decide_tool_mode(configured: str, host: str, model: str, timeout_s: float) -> dict[str, Any]:
    """The run's tool mode and why: the configured one, or in `auto` the capabilities'.

    An `auto` run whose server does not report capabilities (older Ollama, or
    unreachable right now) starts native; a 400 "does not support tools" switches it to
    text later (see `invoke`).
    """
    if configured != "auto":
        return {"mode": configured, "configured": configured, "capabilities": None}
    caps = model_capabilities(host, model, timeout_s)
    mode: Mode = "text" if caps is not None and "tools" not in caps else "native"
    return {"mode": mode, "configured": "auto", "capabilities": caps}


def is_no_tools_error(exc: BaseException) -> bool:
    """Ollama refused `tools` for this model (HTTP 400 "... does not support tools")."""
    import ollama

    return (
        isinstance(exc, ollama.ResponseError)
        and exc.status_code == 400
        and "does not support tools" in str(exc.error)
    )
