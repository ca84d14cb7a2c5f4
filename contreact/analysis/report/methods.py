"""Methods: what a paper's methods section needs to say about how each run was made.

Seeds, sampling options, context size, reasoning level, operator policy, similarity
method, context trims and which earlier notes each cycle saw come from the run's config
and event log. The system prompt is read back from the log (cycle 1 logs it whole) and
identified by its SHA-256. Model digests and the Ollama version are asked of each run's
host (`/api/show`, `/api/version`) when the report is made, with a short timeout: an
unreachable host gives "unavailable", never a hung report.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
from sqlalchemy import Engine

from contreact.analysis.runs import events_of_type
from contreact.checkpoints.registry import RunRecord

HOST_TIMEOUT_S = 3.0
UNAVAILABLE = "unavailable"
_REPLICATE = re.compile(r"\.r(\d+)$")


@dataclass(frozen=True)
class RunMethods:
    """How one run was made."""

    run_id: str
    model: str
    replicate: int | None
    """N of a batch run id `<batch>.<model>.rN` (None outside a batch)."""
    seed: Any
    temperature: Any
    num_ctx: Any
    options: dict[str, Any]
    reasoning: Any
    host: str
    digest: str
    operator: str
    similarity: str
    """The similarity method(s) in force, as logged."""
    prompt_sha: str
    trims: int
    """CONTEXT_TRIM events: prompts that had to be cut to fit num_ctx."""
    notes_left_out: list[tuple[int, list[int]]] = field(default_factory=list)
    """`(cycle, [first, last])`: cycles written without some earlier notes in the prompt."""

    def notes_text(self) -> str:
        """Which cycles were written without which earlier notes ("" when none)."""
        return "; ".join(f"cycle {c}: notes {a}-{b} left out" for c, (a, b) in self.notes_left_out)


@dataclass(frozen=True)
class Methods:
    """The methods record of a report."""

    contreact_version: str
    ollama_versions: dict[str, str]
    runs: list[RunMethods]
    prompts: dict[str, str]
    """Prompt SHA-256 -> text, for every distinct system prompt of the runs."""


def replicate_of(run_id: str) -> int | None:
    """N of `<batch>.<model>.rN`, else None."""
    match = _REPLICATE.search(run_id)
    return int(match.group(1)) if match else None


def _operator(config: dict[str, Any]) -> str:
    section = config.get("operator") or {}
    mode = str(section.get("mode", "auto"))
    if mode != "auto":
        return mode
    if section.get("no_reply"):
        return "auto (no reply)"
    if section.get("replies") or section.get("replies_file"):
        return "auto (scripted replies)"
    return f"auto: {section.get('reply', '')!r}"


class _Hosts:
    """Digests and versions asked of Ollama hosts, once per host and model."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self.digests: dict[tuple[str, str], str] = {}
        self.versions: dict[str, str] = {}
        self.down: set[str] = set()

    def _get(self, method: str, url: str, **kwargs: Any) -> dict[str, Any] | None:
        host = url.split("/api/")[0]
        if host in self.down:
            return None
        try:
            reply = httpx.request(method, url, timeout=self.timeout_s, **kwargs)
        except httpx.HTTPError:
            self.down.add(host)
            return None
        if reply.status_code != 200:
            return None
        try:
            data = reply.json()
        except ValueError:
            return None
        return data if isinstance(data, dict) else None

    def version(self, host: str) -> str:
        if host not in self.versions:
            data = self._get("GET", f"{host.rstrip('/')}/api/version")
            self.versions[host] = str(data.get("version")) if data else UNAVAILABLE
        return self.versions[host]

    def digest(self, host: str, model: str) -> str:
        key = (host, model)
        if key not in self.digests:
            base = host.rstrip("/")
            data = self._get("POST", f"{base}/api/show", json={"model": model})
            digest = (data or {}).get("digest")
            if not digest:
                # Ollama's /api/show has no digest field; /api/tags lists one per model.
                tags = self._get("GET", f"{base}/api/tags") or {}
                digest = next(
                    (
                        m.get("digest")
                        for m in tags.get("models") or []
                        if model in (m.get("name"), m.get("model"))
                    ),
                    None,
                )
            self.digests[key] = str(digest) if digest else UNAVAILABLE
        return self.digests[key]


def _prompt(engine: Engine, run_id: str) -> str:
    # The system prompt is logged whole by the run's first model call: the stream stops
    # there instead of decoding every call of a long run.
    for _, _, payload in events_of_type(engine, run_id, ("LLM_INVOCATION",)):
        for message in payload.get("new_messages") or []:
            if message.get("role") == "system" and isinstance(message.get("content"), str):
                return str(message["content"])
    return ""


def collect_methods(
    engine: Engine, runs: Sequence[RunRecord], *, ask_hosts: bool = True
) -> Methods:
    """The methods record of `runs` (hosts asked for digests unless `ask_hosts` is False)."""
    from contreact import __version__

    hosts = _Hosts(HOST_TIMEOUT_S)
    prompts: dict[str, str] = {}
    records = []
    for run in runs:
        config = run.config
        options = dict(config.get("model_options") or {})
        similarity: list[str] = []
        trims = 0
        left_out: list[tuple[int, list[int]]] = []
        kinds = ("SIMILARITY", "CONTEXT_TRIM", "CYCLE_END")
        for cycle, kind, payload in events_of_type(engine, run.run_id, kinds):
            if kind == "SIMILARITY":
                method = str(payload.get("method") or "")
                if method and method != "none" and method not in similarity:
                    similarity.append(method)
            elif kind == "CONTEXT_TRIM":
                trims += 1
            elif payload.get("notes_left_out"):
                left_out.append((cycle, list(payload["notes_left_out"])))
        if not (config.get("similarity") or {}).get("enabled", True):
            similarity = ["off"]
        text = _prompt(engine, run.run_id)
        sha = hashlib.sha256(text.encode("utf-8")).hexdigest() if text else ""
        if sha:
            prompts.setdefault(sha, text)
        host = run.host
        records.append(
            RunMethods(
                run_id=run.run_id,
                model=run.model,
                replicate=replicate_of(run.run_id),
                seed=options.get("seed"),
                temperature=options.get("temperature"),
                num_ctx=options.get("num_ctx"),
                options=options,
                reasoning=(config.get("ollama") or {}).get("reasoning"),
                host=host,
                digest=hosts.digest(host, run.model) if ask_hosts and host else UNAVAILABLE,
                operator=_operator(config),
                similarity=", ".join(similarity) or "none",
                prompt_sha=sha,
                trims=trims,
                notes_left_out=left_out,
            )
        )
    versions = {
        host: (hosts.version(host) if ask_hosts else UNAVAILABLE)
        for host in dict.fromkeys(r.host for r in runs if r.host)
    }
    return Methods(__version__, versions, records, prompts)
