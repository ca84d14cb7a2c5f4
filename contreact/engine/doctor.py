"""Pre-flight checks before a long run: is Ollama there, has it the model, can it call tools?

A ten-hour batch that fails in its first minute because a model was never pulled, or
because the model has no tool support and silently answers in prose, is the most common
way to lose a night. These checks take a second.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from contreact.checkpoints.engines import engine_for
from contreact.checkpoints.storage import Storage
from contreact.config import Settings
from contreact.errors import detail
from contreact.ollama.credentials import ollama_auth
from contreact.ollama.hosts import resolve_host


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
    with httpx.Client(timeout=timeout, auth=ollama_auth()) as client:
        version = _version(client, host)
        yield version
        if version.ok:
            yield from _model_checks(client, host, model, tools)
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
    yield extensions_check(settings)
    yield _storage_check(storage)


def extensions_check(settings: Settings) -> Check:
    """Whether the run's own tools and hooks load: imported now, as the run would import them.

    A tool whose module is missing or misspelt would otherwise pass every other check and
    stop the run as it starts.
    """
    from contreact.extensions.loading import build_extensions
    from contreact.graph.state import Context
    from contreact.tools.custom import ExtensionError

    try:
        built = build_extensions(Context.of(settings))
    except ExtensionError as exc:
        return Check("extensions", False, str(exc))
    tools = list(built.toolset.custom)
    hooks = [h.source for h in built.hooks]
    if not tools and not hooks:
        return Check("extensions", True, "no tools or hooks of its own")
    said = [f"tools {', '.join(tools)}"] if tools else []
    said += [f"hooks {', '.join(hooks)}"] if hooks else []
    return Check("extensions", True, "; ".join(said) + " load")


def _version(client: httpx.Client, host: str) -> Check:
    try:
        answer = client.get(f"{host}/api/version").json()
        version = answer.get("version", "?")
    except (httpx.HTTPError, ValueError, AttributeError) as exc:
        return Check(
            "ollama", False, f"cannot reach Ollama at {host}: {exc}; is `ollama serve` running?"
        )
    # The bundled stub says so: a run against it is recorded as a stub run.
    stub = answer.get("contreact_stub")
    server = f"contreact stub {stub} (speaking Ollama {version})" if stub else f"Ollama {version}"
    return Check("ollama", True, f"{server} at {host}")


def _model_checks(client: httpx.Client, host: str, model: str, tools: str) -> Iterator[Check]:
    """Is `model` on `host`, and how will it call tools under `tools`?"""
    try:
        details = _show(client, host, model)
    except httpx.HTTPError as exc:
        yield Check("model", False, f"asking {host} about {model!r} failed: {exc}")
        return
    if details is None:
        yield Check("model", False, f"model {model!r} is not on {host}: run `ollama pull {model}`")
        return
    size = (details.get("details") or {}).get("parameter_size", "")
    yield Check("model", True, f"{model} {size}".strip())
    yield _tool_support(model, details, tools)


def batch_checks(
    runs: Sequence[Settings], hosts: Sequence[str], storage: Storage, timeout: float = 5.0
) -> Iterator[Check]:
    """The checks of what a batch needs: every model on every host it may run on, the storage.

    A run can move to any of the batch's hosts when its own goes down, so each host must
    answer and serve every model. Each (host, model) pair is asked once.
    """
    every_host = list(dict.fromkeys([*(resolve_host(h) for h in hosts), *(r.host for r in runs)]))
    models = {r.model: r.tools.mode for r in runs}
    with httpx.Client(timeout=timeout, auth=ollama_auth()) as client:
        for host in every_host:
            version = _version(client, host)
            yield version
            if not version.ok:
                continue
            for model, tools in models.items():
                yield from _model_checks(client, host, model, tools)
    seen: set[str] = set()
    for run in runs:
        loaded = extensions_check(run)
        if loaded.detail not in seen:
            seen.add(loaded.detail)
            yield loaded
    stored = _storage_check(storage)
    yield stored
    if stored.ok and not storage.is_sqlite:
        yield _queue_check(storage)


def _queue_check(storage: Storage) -> Check:
    """Whether the study queue is in the database, or can be made there (PostgreSQL)."""
    from sqlalchemy import text

    try:
        with engine_for(storage).connect() as conn:
            if conn.execute(text("SELECT to_regclass('procrastinate_jobs')")).scalar() is None:
                allowed = conn.execute(
                    text("SELECT has_schema_privilege(current_user, 'public', 'CREATE')")
                ).scalar()
                if not allowed:
                    return Check(
                        "queue",
                        False,
                        f"the study queue's tables cannot be made in {storage.shown_url}: "
                        "this role may not CREATE in schema public",
                    )
                return Check("queue", True, "made in the database by the first `contreact batch`")
            queued, workers = conn.execute(
                text(
                    "SELECT (SELECT count(*) FROM procrastinate_jobs WHERE status IN "
                    "('todo', 'doing')), (SELECT count(*) FROM procrastinate_workers)"
                )
            ).one()
        return Check("queue", True, f"{queued} runs queued or in hand, {workers} workers beating")
    except Exception as exc:  # noqa: BLE001 - any failure is the verdict
        return Check("queue", False, f"cannot read the study queue: {storage.redact(detail(exc))}")


def _storage_check(storage: Storage) -> Check:
    try:
        with engine_for(storage).connect():
            pass
        return Check("storage", True, storage.shown_url)
    except Exception as exc:  # noqa: BLE001 - any failure is the verdict
        return Check(
            "storage",
            False,
            f"cannot open {storage.shown_url}: {storage.redact(detail(exc))}",
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
