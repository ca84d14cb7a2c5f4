"""Provenance: what a run was made with, recorded when it starts, resumes, extends or forks.

A methods section written from a look at the host when the report is made gets the wrong
digest once a model is pulled again, and nothing once the host is down. So the record is
made while the run happens: the model's digest, details and template hash (`/api/show`,
`/api/tags`), the server's version and whether it is contreact's stub, every option sent,
the libraries, and hashes of the system prompt, the tool schemas and the settings.

`gather` makes the network calls; it is only ever called inside the journaled effect that
records its result (RUN_START in `assemble`, a fork's RUN_START and every PROVENANCE in the
runner), so a step replayed after a crash reuses the record and the prompt stays a pure
function of state. A host that cannot answer gives `unavailable` with the reason, and the
run goes on (its model calls have their own retries and errors).
"""

from __future__ import annotations

import functools
import hashlib
import json
import platform
from datetime import UTC, datetime
from importlib import metadata
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from contreact.graph.state import Context
from contreact.nodes.prompts import SYSTEM_PROMPT, TASKED_SYSTEM_PROMPT
from contreact.ollama.credentials import ollama_auth
from contreact.tools.registry import TOOL_SCHEMAS

UNAVAILABLE = "unavailable"
QUERY_TIMEOUT_S = 10.0
"""At most this long per metadata request: a hung host must not hold a run's start for the
model call's own timeout three times over."""
LIBRARIES = ("langgraph", "langchain-ollama", "langchain-core", "ollama")
"""The libraries between contreact and the model whose versions a run records."""


def sha256_text(text: str) -> str:
    """The SHA-256 (hex) of `text` as UTF-8."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sha256_json(value: Any) -> str:
    """The SHA-256 of `value` as canonical JSON (sorted keys), so equal data hash equal."""
    return sha256_text(json.dumps(value, sort_keys=True, ensure_ascii=False, default=str))


def library_versions() -> dict[str, str]:
    """contreact's, the model stack's, Python's and the platform's versions."""
    return dict(_library_versions())


@functools.cache
def _library_versions() -> dict[str, str]:
    # Fixed for the life of a process: a batch's or a chat's many records read them once.
    from contreact.version import __version__

    versions = {"contreact": __version__}
    for name in LIBRARIES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    versions["python"] = platform.python_version()
    versions["platform"] = platform.platform()
    return versions


def public_host(host: str) -> str:
    """The host as it may be recorded: without a user, password, query or fragment."""
    parts = urlsplit(host)
    netloc = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _canonical(name: str) -> str:
    return name if ":" in name.rpartition("/")[2] else f"{name}:latest"


def _reason(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}".splitlines()[0][:300]


def ask_server(host: str, model: str, timeout_s: float) -> dict[str, Any]:
    """What the Ollama server at `host` says about itself and `model`.

    Keys: `server` (`ollama`, `stub` or `unavailable`), `ollama_version`, `stub_version`
    (the stub only), `digest`, `details`, `template_sha256`, and `unavailable` (why a part
    could not be asked) when something failed.
    """
    found: dict[str, Any] = {
        "server": UNAVAILABLE,
        "ollama_version": UNAVAILABLE,
        "digest": UNAVAILABLE,
        "details": {},
        "template_sha256": UNAVAILABLE,
    }
    problems: list[str] = []
    base = host.rstrip("/")
    # A plain-http server has no certificate: the CA bundle need not be loaded.
    with httpx.Client(
        timeout=timeout_s, verify=not base.startswith("http://"), auth=ollama_auth()
    ) as client:
        try:
            version = client.get(f"{base}/api/version").json()
        except (httpx.HTTPError, ValueError) as exc:
            found["unavailable"] = f"{base}/api/version: {_reason(exc)}"
            return found
        version = version if isinstance(version, dict) else {}
        found["ollama_version"] = str(version.get("version") or UNAVAILABLE)
        found["server"] = "stub" if "contreact_stub" in version else "ollama"
        if "contreact_stub" in version:
            found["stub_version"] = str(version["contreact_stub"])
        show_digest = None
        try:
            reply = client.post(f"{base}/api/show", json={"model": model})
            show = reply.json() if reply.status_code == 200 else None
            if not isinstance(show, dict):
                problems.append(f"/api/show answered HTTP {reply.status_code}")
            else:
                details = show.get("details") or {}
                keep = ("family", "parameter_size", "quantization_level", "format")
                found["details"] = {k: details[k] for k in keep if k in details}
                if isinstance(show.get("template"), str):
                    found["template_sha256"] = sha256_text(show["template"])
                show_digest = show.get("digest")
        except (httpx.HTTPError, ValueError) as exc:
            problems.append(f"/api/show: {_reason(exc)}")
        try:
            # Ollama's /api/show has no digest; /api/tags lists one per model.
            reply = client.get(f"{base}/api/tags")
            tags = reply.json() if reply.status_code == 200 else None
            listed = tags.get("models") if isinstance(tags, dict) else None
            want = _canonical(model)
            digest = next(
                (
                    m.get("digest")
                    for m in listed or []
                    if isinstance(m, dict)
                    and want in (_canonical(str(m.get("name"))), _canonical(str(m.get("model"))))
                ),
                None,
            )
            if digest or show_digest:
                found["digest"] = str(digest or show_digest)
            elif tags is None:
                problems.append(f"/api/tags answered HTTP {reply.status_code}")
            else:
                problems.append(f"/api/tags does not list {model}")
        except (httpx.HTTPError, ValueError) as exc:
            problems.append(f"/api/tags: {_reason(exc)}")
    if problems:
        found["unavailable"] = "; ".join(problems)
    return found


def gather(ctx: Context, *, task: str | None) -> dict[str, Any]:
    """The provenance record of a run executed with `ctx`, as of now (asks its host).

    Call it only inside the journaled effect that records the result.
    """
    if ctx.chat_model is not None:
        server: dict[str, Any] = {
            "server": "in-process",
            "ollama_version": UNAVAILABLE,
            "digest": UNAVAILABLE,
            "details": {},
            "template_sha256": UNAVAILABLE,
            "unavailable": "an in-process chat model, no Ollama server",
        }
    else:
        timeout = min(ctx.ollama.timeout_s, QUERY_TIMEOUT_S)
        server = ask_server(ctx.host, ctx.model, timeout)
    settings = {k: v for k, v in ctx.settings_data().items() if k != "storage"}
    return {
        "recorded_at": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        "host": public_host(ctx.host),
        "model": ctx.model,
        **server,
        "options": ctx.sent_options,
        "seed": ctx.sent_options.get("seed"),
        "think": ctx.ollama.reasoning,
        "keep_alive": ctx.ollama.keep_alive,
        "versions": library_versions(),
        "hashes": {
            "system_prompt": sha256_text(TASKED_SYSTEM_PROMPT if task else SYSTEM_PROMPT),
            "tool_schemas": sha256_json(TOOL_SCHEMAS),
            "settings": sha256_json(settings),
        },
    }
