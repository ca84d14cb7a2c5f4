"""Methods: what a paper's methods section needs to say about how each run was made.

Everything here is read from the runs' own records, never asked of a host: a report made
with every host down, or after a model was pulled again, says what the runs were made with.
Provenance (model digest, details, template hash, server and its version, whether it was
contreact's stub, library versions, hashes of prompt, tools and settings) comes from each
run's RUN_START and its PROVENANCE events (`nodes.provenance`), recorded as the run began and
at every resume and extension, so a digest that changed in between is reported. Seeds,
sampling options, context size, reasoning, limits, the user turn and the operator policy
come from the run's stored config; similarity methods, context trims, the notes each cycle
saw and start and end times from its event log. The system prompt is read back from the log
(a cycle's first call logs it whole) and identified by its SHA-256.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine, select

from contreact.analysis.runs import events_of_type, replicate_of
from contreact.checkpoints.registry import RunRecord
from contreact.checkpoints.schema import events

NOT_RECORDED = "not recorded (run made before provenance was recorded)"


@dataclass(frozen=True)
class Record:
    """One provenance record of a run: as it started, forked, resumed or was extended."""

    occasion: str
    """`start`, `fork`, `resume` or `extension`."""
    cycle: int
    """The cycle the run started or went on from."""
    at: str
    """When (ISO-8601 UTC)."""
    data: dict[str, Any]
    """The record (`nodes.provenance.gather`)."""

    @property
    def digest(self) -> str:
        """The model's digest as the host listed it then."""
        return str(self.data.get("digest") or "unavailable")


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
    records: list[Record] = field(default_factory=list)
    """The run's provenance records, oldest first (empty: made before they were recorded)."""
    started: str = ""
    """When the run (or the fork) began, from its record or its first event."""
    ended: str = ""
    """When it ended (RUN_END), or its last cycle closed while unfinished; "" if none did."""
    limits: dict[str, Any] = field(default_factory=dict)
    user_turn: str = ""

    def notes_text(self) -> str:
        """Which cycles were written without which earlier notes ("" when none)."""
        return "; ".join(f"cycle {c}: notes {a}-{b} left out" for c, (a, b) in self.notes_left_out)

    @property
    def first(self) -> Record | None:
        """The record the run began with (None: not recorded)."""
        return self.records[0] if self.records else None

    @property
    def server(self) -> str:
        """`stub` if any record says the run talked to contreact's stub, else the first's."""
        kinds = [str(r.data.get("server") or "unavailable") for r in self.records]
        if "stub" in kinds:
            return "stub"
        return kinds[0] if kinds else NOT_RECORDED

    def digest_changes(self) -> list[str]:
        """Each time a resume or extension found another digest than the record before it."""
        changes = []
        for before, after in zip(self.records, self.records[1:], strict=False):
            if after.digest != before.digest:
                changes.append(
                    f"at cycle {after.cycle} ({after.occasion}, {after.at}): "
                    f"{before.digest} -> {after.digest}"
                )
        return changes


@dataclass(frozen=True)
class Methods:
    """The methods record of a report."""

    contreact_version: str
    """The contreact that made the report (each run's own is in its record)."""
    ollama_versions: dict[str, str]
    """Host -> the server version(s) the runs recorded there."""
    runs: list[RunMethods]
    prompts: dict[str, str]
    """Prompt SHA-256 -> text, for every distinct system prompt of the runs."""


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


_TIMED = ("RUN_START", "PROVENANCE", "CYCLE_END", "RUN_END")


def _timed_events(engine: Engine, run_id: str) -> list[tuple[int, str, str, dict[str, Any]]]:
    """`(cycle, event_type, timestamp, payload)` of the events that date a run, in log order."""
    query = (
        select(events.c.cycle, events.c.event_type, events.c.timestamp, events.c.payload)
        .where(events.c.run_id == run_id, events.c.event_type.in_(_TIMED))
        .order_by(events.c.id)
    )
    with engine.connect() as conn:
        return [(int(c), str(k), str(t), json.loads(p)) for c, k, t, p in conn.execute(query)]


def provenance_of(engine: Engine, run: RunRecord) -> tuple[list[Record], str, str]:
    """A run's provenance records, its start and its end (from its own event log).

    A fork inherits its parent's RUN_START and earlier records; its own story begins
    with the RUN_START that names it (`forked_from`), so what came before is left out.
    """
    timed = _timed_events(engine, run.run_id)
    records: list[Record] = []
    started = ended = ""
    for cycle, kind, at, payload in timed:
        if kind == "RUN_START":
            if payload.get("forked_from"):
                records, started, ended = [], at, ""  # the fork's own story starts here
                if payload.get("provenance"):
                    records.append(Record("fork", cycle, at, payload["provenance"]))
            elif not started:
                started = at
                if payload.get("provenance"):
                    records.append(Record("start", cycle, at, payload["provenance"]))
        elif kind == "PROVENANCE" and payload.get("provenance"):
            occasion = str(payload.get("occasion") or "resume")
            records.append(Record(occasion, cycle, at, payload["provenance"]))
        elif kind in ("RUN_END", "CYCLE_END"):
            ended = at
    if records:
        started = str(records[0].data.get("recorded_at") or started)
    return records, started, ended


def _prompt(engine: Engine, run_id: str) -> str:
    # The system prompt is logged whole by the run's first model call: the stream stops
    # there instead of decoding every call of a long run.
    for _, _, payload in events_of_type(engine, run_id, ("LLM_INVOCATION",)):
        for message in payload.get("new_messages") or []:
            if message.get("role") == "system" and isinstance(message.get("content"), str):
                return str(message["content"])
    return ""


def collect_methods(engine: Engine, runs: Sequence[RunRecord]) -> Methods:
    """The methods record of `runs`, from their stored configs and event logs alone."""
    from contreact.version import __version__

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
        provenance, started, ended = provenance_of(engine, run)
        first = provenance[0] if provenance else None
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
                host=str(first.data.get("host") or run.host) if first else run.host,
                digest=first.digest if first else NOT_RECORDED,
                operator=_operator(config),
                similarity=", ".join(similarity) or "none",
                prompt_sha=sha,
                trims=trims,
                notes_left_out=left_out,
                records=provenance,
                started=started,
                ended=ended,
                limits=dict(config.get("limits") or {}),
                user_turn=str(config.get("user_turn") or ""),
            )
        )
    return Methods(__version__, _server_versions(records), records, prompts)


def server_version(record: Record) -> str:
    """What one record says the server was: `Ollama 0.12.6`, or the stub and its version."""
    data = record.data
    version = str(data.get("ollama_version") or "unavailable")
    if data.get("server") == "stub":
        return f"contreact stub {data.get('stub_version', '?')} (speaking Ollama {version})"
    if data.get("server") == "in-process":
        return "in-process chat model (no server)"
    if data.get("server") == "ollama":
        return f"Ollama {version}"
    return "unavailable"


def _server_versions(runs: Sequence[RunMethods]) -> dict[str, str]:
    found: dict[str, list[str]] = {}
    for run in runs:
        if not run.records:
            found.setdefault(run.host, [])
            if NOT_RECORDED not in found[run.host]:
                found[run.host].append(NOT_RECORDED)
        for record in run.records:
            host = str(record.data.get("host") or run.host)
            text = server_version(record)
            if text not in found.setdefault(host, []):
                found[host].append(text)
    return {host: ", ".join(texts) for host, texts in found.items() if host}
