"""Pre-flight checks before a long run: is Ollama there, has it the model, can it call tools?

A ten-hour batch that fails in its first minute because a model was never pulled, or
because the model has no tool support and silently answers in prose, is the most common
way to lose a night. These checks take a second.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx

from contreact.checkpoints.engines import engine_for
from contreact.checkpoints.storage import Storage
from contreact.config import Settings


@dataclass(frozen=True)
class Check:
    """One check's verdict."""

    name: str
    ok: bool
    detail: str


def _show(client: httpx.Client, host: str, model: str) -> dict[str, Any] | None:
    reply = client.post(f"{host}/api/show", json={"model": model})
    if reply.status_code == 404:
        return None
    reply.raise_for_status()
    data: dict[str, Any] = reply.json()
    return data


def _similarity_method(settings: Settings, embedding: bool) -> Check:
    """Which similarity method the monitor will use, with its thresholds."""
    similarity = settings.similarity
    if embedding:
        return Check(
            "similarity",
            True,
            f"embedding:{similarity.embedding_model} (cosine; moderate > "
            f"{similarity.moderate}, high > {similarity.high})",
        )
    return Check(
        "similarity",
        True,
        "lexical-char-tfidf (character 3-5-gram TF-IDF cosine; moderate > "
        f"{similarity.lexical_moderate}, high > {similarity.lexical_high}; "
        "set similarity.embedding_model for embeddings)",
    )


def run_checks(settings: Settings, storage: Storage, timeout: float = 5.0) -> Iterator[Check]:
    """The checks of what a run with `settings` needs, in order.

    Later Ollama checks are skipped once Ollama is unreachable. The host is read as
    Ollama's client reads it (`127.0.0.1` means port 11434), and the tools check says
    which mode the run will get under its configured `tools`.
    """
    host, model, tools = settings.host, settings.model, settings.tools.mode
    embedding_model = settings.similarity.embedding_model
    embedding_found = False
    with httpx.Client(timeout=timeout) as client:
        try:
            version = client.get(f"{host}/api/version").json().get("version", "?")
        except (httpx.HTTPError, ValueError) as exc:
            yield Check(
                "ollama", False, f"cannot reach Ollama at {host}: {exc}; is `ollama serve` running?"
            )
        else:
            yield Check("ollama", True, f"Ollama {version} at {host}")
            try:
                details = _show(client, host, model)
            except httpx.HTTPError as exc:
                yield Check("model", False, f"asking {host} about {model!r} failed: {exc}")
                details = None
            else:
                if details is None:
                    yield Check(
                        "model",
                        False,
                        f"model {model!r} is not on {host}: run `ollama pull {model}`",
                    )
                else:
                    size = (details.get("details") or {}).get("parameter_size", "")
                    yield Check("model", True, f"{model} {size}".strip())
                    yield _tool_support(model, details, tools)
            if embedding_model:
                try:
                    found = _show(client, host, embedding_model)
                except httpx.HTTPError:
                    found = None
                embedding_found = found is not None
                yield Check(
                    "embeddings",
                    found is not None,
                    f"{embedding_model} available"
                    if found is not None
                    else f"embedding model {embedding_model!r} missing: similarity is lexical",
                )
    yield _similarity_method(settings, embedding_found)
    try:
        with engine_for(storage).connect():
            pass
        yield Check("storage", True, storage.shown_url)
    except Exception as exc:  # noqa: BLE001 - any failure is the verdict
        yield Check(
            "storage",
            False,
            f"cannot open {storage.shown_url}: {storage.redact(f'{type(exc).__name__}: {exc}')}",
        )


def _tool_support(model: str, details: dict[str, Any], tools: str) -> Check:
    capabilities = details.get("capabilities")
    if capabilities is not None:
        native = "tools" in capabilities
    else:  # older Ollama: a template that renders tools is the sign
        native = ".Tools" in str(details.get("template", ""))
    if tools == "text":
        return Check("tools", True, "text-tool mode (configured `tools: text`)")
    if tools == "constrained":
        return Check(
            "tools", True, "constrained tool mode (configured: text tools held to a JSON schema)"
        )
    if native:
        return Check("tools", True, f"native tool calls (`tools: {tools}`)")
    if tools == "native":
        return Check(
            "tools",
            False,
            f"{model} has no `tools` capability but the config says `tools: native`: Ollama "
            "will refuse the run (use `tools: auto` or `text`)",
        )
    return Check(
        "tools",
        True,
        f"{model} has no `tools` capability: the run will use text-tool mode (tools described "
        "after the system prompt, calls parsed from its text)",
    )
