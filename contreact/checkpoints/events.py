"""The event log: its schema, idempotent keyed rows, and the `logs/<run_id>.jsonl` mirror.

The schema is one payload class per event type (`PAYLOADS`): writers build them, readers
(fork, metrics, batch) parse them back, and a test holds the README's event table to them.

Every event carries a key built from checkpointed counters (cycle, step, call index), so
a node that re-runs after a crash re-inserts nothing. The database is the source of truth;
the JSONL file is appended after each commit for `tail -f`, and rebuilt from the database
whenever a run starts or resumes, which closes the window between a commit and its append.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar, Literal, Self

from sqlalchemy import Engine, bindparam, func, select

from contreact.checkpoints.private_files import open_private
from contreact.checkpoints.schema import events
from contreact.checkpoints.statements import insert_ignore
from contreact.checkpoints.storage import Storage
from contreact.checkpoints.transactions import Tx

EventType = Literal[
    "RUN_START",
    "HOST_CHANGE",
    "PROVENANCE",
    "CYCLE_START",
    "LLM_INVOCATION",
    "TOOL_CALL",
    "OPERATOR_MESSAGE",
    "CONTEXT_TRIM",
    "SIMILARITY",
    "CYCLE_END",
    "ERROR",
    "RECORD_SKIPPED",
    "RUN_END",
    "EXTENSIONS",
    "HOOK",
    "INTERVENTION",
]


class Payload:
    """The payload of one event type: writers build it, readers parse it back (`read`).

    Subclasses are frozen dataclasses; their fields are the payload's keys, in the README's
    event table. Fields listed in `optional` are left out of the payload while None.
    """

    event_type: ClassVar[EventType]
    optional: ClassVar[frozenset[str]] = frozenset()

    def as_dict(self) -> dict[str, Any]:
        """The JSON payload (a field named like a keyword, `from_`, is the key `from`)."""
        out = {}
        for name, key, optional in self._keys():
            value = getattr(self, name)
            if not (optional and value is None):
                out[key] = value
        return out

    @classmethod
    @functools.cache
    def _keys(cls) -> tuple[tuple[str, str, bool], ...]:
        # (field, payload key, left out while None) once per class: every event is built
        # on the hot path, and `fields()` walks the dataclass machinery each time.
        return tuple(
            (f.name, f.name.rstrip("_"), f.name in cls.optional)
            for f in fields(cls)  # type: ignore[arg-type]
        )

    @classmethod
    def read(cls, payload: dict[str, Any]) -> Self:
        """A stored payload as this class (keys it does not know are ignored)."""
        known = {f.name.rstrip("_"): f.name for f in fields(cls)}  # type: ignore[arg-type]
        return cls(**{known[k]: v for k, v in payload.items() if k in known})


@dataclass(frozen=True)
class RunStart(Payload):
    """A run begins (its first cycle starts)."""

    event_type: ClassVar[EventType] = "RUN_START"
    model: str = ""
    host: str = ""
    last_cycle: int = 0
    task: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    tools: dict[str, Any] | None = None
    """How tools are offered (native or text) and why (`nodes.assemble`)."""
    seed: int | None = None
    """The run's seed (`model_options.seed`; None: unseeded)."""
    reasoning: bool | str | None = None
    """Ollama's think setting: true, false, low, medium or high (None: the model's default)."""
    provenance: dict[str, Any] | None = None
    """What the run was made with, asked of its host as it began (`nodes.provenance`); None
    in runs made before provenance was recorded."""


@dataclass(frozen=True)
class Provenance(Payload):
    """A run was resumed or extended: what it goes on with (its host asked again)."""

    event_type: ClassVar[EventType] = "PROVENANCE"
    occasion: str = "resume"
    """`resume` (continued where it stopped) or `extension` (`resume --cycles N`)."""
    provenance: dict[str, Any] = field(default_factory=dict)
    """The record, as in RUN_START (`nodes.provenance`)."""


@dataclass(frozen=True)
class HostChange(Payload):
    """`resume --host` moved the run to another Ollama server."""

    event_type: ClassVar[EventType] = "HOST_CHANGE"
    from_: str = ""
    to: str = ""


@dataclass(frozen=True)
class RunFork(Payload):
    """A branch begins: a `contreact fork`, or Studio time travel (`checkpoints.lineage`)."""

    event_type: ClassVar[EventType] = "RUN_START"
    optional: ClassVar[frozenset[str]] = frozenset(
        {"at_step", "checkpoint_id", "thread_id", "provenance"}
    )
    forked_from: str = ""
    """The scope branched from (a run id, or `RUN@LINEAGE`)."""
    at_cycle: int = 0
    """The last cycle the branch shares with its parent (whole or in part)."""
    model: str = ""
    at_step: int | None = None
    checkpoint_id: str | None = None
    thread_id: str | None = None
    provenance: dict[str, Any] | None = None
    """What a `contreact fork` goes on with, as in RUN_START (a Studio branch: None)."""


@dataclass(frozen=True)
class CycleStart(Payload):
    """A cycle opens."""

    event_type: ClassVar[EventType] = "CYCLE_START"
    opening: str = ""
    advisory: str | None = None


@dataclass(frozen=True)
class LlmInvocation(Payload):
    """One model call: what was new in the prompt, the answer, tokens, time, options."""

    event_type: ClassVar[EventType] = "LLM_INVOCATION"
    step: int = 0
    new_messages: list[dict[str, Any]] = field(default_factory=list)
    response: dict[str, Any] = field(default_factory=dict)
    tokens_in: int | float | None = 0
    """`prompt_eval_count` as the server sent it; None when absent or refused."""
    tokens_out: int | float | None = 0
    """`eval_count` as the server sent it; None when absent or refused."""
    duration_s: float = 0.0
    done_reason: str | None = None
    dropped_fields: list[str] = field(default_factory=list)
    """The server's counts and durations that were refused as numbers (huge, negative,
    NaN, not a number) and recorded as absent (see `contreact.server_numbers`)."""
    flags: list[str] = field(default_factory=list)
    """What is wrong with the answer as text: `truncated` (`done_reason: length`),
    `invented_turn` (it wrote a turn that is not the model's; see `nodes.answer_health`)."""
    server_parse_error: str | None = None
    retries: list[dict[str, Any]] = field(default_factory=list)
    switched_to_text_tools: Any = None
    """Why the run switched to text tools at this call (the model refused native tools)."""
    kept_as_text: bool = False
    """Parts of the answer could not be stored as they were (a 401-digit integer, a lone
    surrogate) and are kept losslessly as text (see `nodes.storable`)."""
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RecordSkipped(Payload):
    """`resume --skip-bad-record` replaced a journaled result its step could not replay."""

    event_type: ClassVar[EventType] = "RECORD_SKIPPED"
    key: str = ""
    """The journal record's key (`c3:s0:llm`: cycle 3's first model call)."""
    reason: str = ""
    """Why replaying it failed, in one line."""
    becomes: str = ""
    """What the step took instead (a model call: an empty answer, so the run is nudged)."""


@dataclass(frozen=True)
class ToolCall(Payload):
    """One tool call the model made (run, refused or invalid) and what it returned."""

    event_type: ClassVar[EventType] = "TOOL_CALL"
    step: int = 0
    call_id: str = ""
    tool_name: str = ""
    parameters: dict[str, Any] = field(default_factory=dict)
    output: str = ""
    error: bool = False
    refused: bool = False
    truncated: bool = False
    duration_s: float = 0.0


@dataclass(frozen=True)
class OperatorMessage(Payload):
    """The agent messaged the operator, and the reply it got."""

    event_type: ClassVar[EventType] = "OPERATOR_MESSAGE"
    step: int = 0
    message: str = ""
    reply: str = ""
    policy: str = ""
    wait_s: float | None = None


@dataclass(frozen=True)
class ContextTrim(Payload):
    """The prompt was trimmed to fit `num_ctx`."""

    event_type: ClassVar[EventType] = "CONTEXT_TRIM"
    step: int = 0
    dropped_messages: int = 0
    reflections_omitted: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
    budget: int = 0
    fits: bool = True


@dataclass(frozen=True)
class Similarity(Payload):
    """The similarity monitor's verdict on a reflection (`SimilarityReport.as_payload`)."""

    event_type: ClassVar[EventType] = "SIMILARITY"
    scores: list[dict[str, Any]] = field(default_factory=list)
    """The highest scores (`similarity.LOGGED_SCORES`), `{cycle, score}`, in cycle order."""
    compared: int = 0
    """How many earlier reflections were scored (events before this field: `len(scores)`)."""
    maximum: float = 0.0
    most_similar_cycle: int | None = None
    method: str = "none"
    note: str = ""
    level: str = "none"
    advisory: str | None = None
    moderate: float = 0.0
    high: float = 0.0


@dataclass(frozen=True)
class CycleEnd(Payload):
    """A cycle closed with its reflection."""

    event_type: ClassVar[EventType] = "CYCLE_END"
    optional: ClassVar[frozenset[str]] = frozenset({"reflection_fields"})
    final_reflection: str = ""
    metrics: dict[str, Any] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)
    notes_seen: list[int] = field(default_factory=list)
    """`[first, last]`: the earlier cycles whose reflections were in the prompt ([]: none)."""
    notes_left_out: list[int] = field(default_factory=list)
    """`[first, last]`: earlier reflections left out to fit `num_ctx` ([]: none)."""
    reflection_fields: dict[str, Any] | None = None
    """A structured reflection's fields (`reflection.format: json`), e.g. `plan`; left out
    of the payload for text reflections and for notes that were not valid JSON."""


@dataclass(frozen=True)
class Error(Payload):
    """A model call or a tool failed."""

    event_type: ClassVar[EventType] = "ERROR"
    optional: ClassVar[frozenset[str]] = frozenset({"attempts", "model", "host", "tool_name"})
    step: int = 0
    kind: str = ""
    message: str = ""
    attempts: int | None = None
    model: str | None = None
    host: str | None = None
    tool_name: str | None = None


ParseFailureKind = Literal["malformed_call", "echoed_placeholder_call", "unreadable_markup"]
"""Why `parse` sent a corrective turn (`nodes.toolcalls.NoAnswerReason` without `empty`)."""


@dataclass(frozen=True)
class ParseFailure(Payload):
    """The model's answer got a corrective turn instead of running or closing the cycle.

    No call in it could be run, and it was not taken as the reflection: a broken call, the
    call format's placeholders echoed back, or tool-call markup the parser cannot read.
    """

    event_type: ClassVar[EventType] = "ERROR"
    step: int = 0
    kind: ParseFailureKind = "malformed_call"
    message: str = ""


@dataclass(frozen=True)
class RunEnd(Payload):
    """The run completed its last cycle."""

    event_type: ClassVar[EventType] = "RUN_END"
    status: str = "completed"
    cycles: int = 0


@dataclass(frozen=True)
class Extensions(Payload):
    """The run's own tools and hooks and the built-ins it switched off (once per run)."""

    event_type: ClassVar[EventType] = "EXTENSIONS"
    tools: list[dict[str, Any]] = field(default_factory=list)
    """Each tool: `name`, `effect`, `import_path`, `distribution`, `version`, `source_sha256`."""
    hooks: list[dict[str, Any]] = field(default_factory=list)
    """Each hook: `import_path`, `distribution`, `version`, `source_sha256`, `points`."""
    disabled: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class HookAction(Payload):
    """A before-tool hook vetoed a call (`veto`) or changed its arguments (`rewrite`)."""

    event_type: ClassVar[EventType] = "HOOK"
    optional: ClassVar[frozenset[str]] = frozenset({"reason", "rewritten"})
    step: int = 0
    action: str = "veto"
    hook: str = ""
    tool_name: str = ""
    parameters: dict[str, Any] = field(default_factory=dict)
    """The arguments the model gave."""
    reason: str | None = None
    rewritten: dict[str, Any] | None = None
    """The arguments the call ran with instead (`rewrite`)."""


@dataclass(frozen=True)
class Intervention(Payload):
    """An intervention of the config (`interventions[index]`) acted: once per place."""

    event_type: ClassVar[EventType] = "INTERVENTION"
    optional: ClassVar[frozenset[str]] = frozenset({"step", "tool_name"})
    index: int = 0
    kind: str = ""
    """`operator_message`, `memory` or `tool_fails`."""
    detail: dict[str, Any] = field(default_factory=dict)
    """What it did: the message, `{"clear": true, "deleted": N}`, the tool's error."""
    step: int | None = None
    tool_name: str | None = None


PAYLOADS: dict[EventType, tuple[type[Payload], ...]] = {
    "RUN_START": (RunStart, RunFork),
    "HOST_CHANGE": (HostChange,),
    "PROVENANCE": (Provenance,),
    "CYCLE_START": (CycleStart,),
    "LLM_INVOCATION": (LlmInvocation,),
    "TOOL_CALL": (ToolCall,),
    "OPERATOR_MESSAGE": (OperatorMessage,),
    "CONTEXT_TRIM": (ContextTrim,),
    "SIMILARITY": (Similarity,),
    "CYCLE_END": (CycleEnd,),
    "ERROR": (Error, ParseFailure),
    "RECORD_SKIPPED": (RecordSkipped,),
    "RUN_END": (RunEnd,),
    "EXTENSIONS": (Extensions,),
    "HOOK": (HookAction,),
    "INTERVENTION": (Intervention,),
}
"""Every event type and the payload classes written under it (the log's schema)."""


@dataclass(frozen=True)
class Event:
    """One event before it is stored; `key` (from `checkpoints.keys`) is unique in its scope."""

    cycle: int
    key: str
    data: Payload

    @property
    def event_type(self) -> EventType:
        """The payload's event type."""
        return self.data.event_type

    @property
    def payload(self) -> dict[str, Any]:
        """The JSON payload."""
        return self.data.as_dict()


def utc_now() -> str:
    """The current time as ISO-8601 UTC."""
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def as_line(run_id: str, row: dict[str, Any]) -> dict[str, Any]:
    """The public JSONL shape of a stored event row."""
    payload = row["payload"]
    return {
        "timestamp": row["timestamp"],
        "run_id": run_id,
        "cycle_number": row["cycle"],
        "event_type": row["event_type"],
        "payload": json.loads(payload) if isinstance(payload, str) else payload,
    }


def event_row(run_id: str, ev: Event) -> dict[str, Any]:
    """The `events` row that stores `ev`, stamped now."""
    return {
        "run_id": run_id,
        "key": ev.key,
        "cycle": ev.cycle,
        "event_type": ev.event_type,
        "timestamp": utc_now(),
        "payload": json.dumps(ev.payload, ensure_ascii=False, default=str),
    }


def insert_events(conn: Tx, run_id: str, batch: Iterable[Event]) -> list[str]:
    """Insert events inside the caller's transaction; returns the JSONL lines that were new."""
    fresh: list[str] = []
    for ev in batch:
        row = event_row(run_id, ev)
        if insert_ignore(conn, events, row):
            fresh.append(line_text(run_id, row))
    return fresh


def line_text(run_id: str, row: dict[str, Any]) -> str:
    """A stored event row's JSONL line, its payload text spliced in as it was stored.

    The same text as `json.dumps(as_line(run_id, row), ensure_ascii=False)` for a payload
    that `json.dumps(payload, ensure_ascii=False)` wrote. Every event is appended as it
    commits: decoding the payload just encoded, to encode it again inside the line, cost
    more than the insert.
    """
    return (
        f'{{"timestamp": {json.dumps(row["timestamp"])}, '
        f'"run_id": {json.dumps(run_id, ensure_ascii=False)}, '
        f'"cycle_number": {int(row["cycle"])}, '
        f'"event_type": {json.dumps(row["event_type"])}, '
        f'"payload": {row["payload"]}}}'
    )


def log_path(storage: Storage, run_id: str) -> Path:
    """Where a run's JSONL log lives."""
    return storage.logs_dir / f"{run_id}.jsonl"


def append_lines(storage: Storage, run_id: str, lines: Sequence[dict[str, Any]]) -> None:
    """Append events (JSONL-shaped dicts) to the run's JSONL mirror."""
    if not lines:
        return
    with open_private(log_path(storage, run_id), "a") as fh:
        for line in lines:
            fh.write(json.dumps(line, ensure_ascii=False) + "\n")


committed_watch: ContextVar[Callable[[str, Sequence[str]], None] | None] = ContextVar(
    "contreact_committed_watch", default=None
)
"""Told of the events each commit added (scope, JSONL lines), in the context that set it.

Only new events reach the mirror, so a watcher sees every effect once: a step replayed
from the journal after a resume commits nothing new. A run's traces are made from them.
"""


def mirror_lines(engine: Engine, storage: Storage, run_id: str, lines: Sequence[str]) -> None:
    """Append committed events (`line_text`) to the JSONL mirror; a deleted one is rebuilt.

    Appending to a deleted log would start a new file holding only the newest events;
    rebuilt from the database instead, it holds them all (these included, committed).
    The file is opened without `O_CREAT`, so finding it gone costs nothing extra.
    """
    if not lines:
        return
    watch = committed_watch.get()
    if watch is not None:
        watch(run_id, lines)
    try:
        fd = os.open(log_path(storage, run_id), os.O_WRONLY | os.O_APPEND)
    except FileNotFoundError:
        rebuild_log(engine, storage, run_id)
        return
    try:
        data = ("\n".join(lines) + "\n").encode("utf-8")
        # One write of the whole batch: O_APPEND puts it at the end in one piece.
        while data:
            data = data[os.write(fd, data) :]
    finally:
        os.close(fd)


def read_events(
    engine: Engine, run_id: str, *, upto_cycle: int | None = None
) -> list[dict[str, Any]]:
    """A run's events in the order they were first committed, as JSONL-shaped dicts."""
    return list(iter_events(engine, run_id, upto_cycle=upto_cycle))


STREAMED_ROWS = 500
"""Rows fetched at a time when a whole log is streamed (`iter_events`)."""


def iter_events(
    engine: Engine, run_id: str, *, upto_cycle: int | None = None
) -> Iterator[dict[str, Any]]:
    """`read_events`, streamed: a 10,000-cycle log is written out without being held whole."""
    query = select(events).where(events.c.run_id == run_id).order_by(events.c.id)
    if upto_cycle is not None:
        query = query.where(events.c.cycle <= upto_cycle)
    with engine.connect() as conn:
        rows = conn.execution_options(yield_per=STREAMED_ROWS).execute(query).mappings()
        for row in rows:
            yield as_line(run_id, dict(row))


def rebuild_log(engine: Engine, storage: Storage, run_id: str) -> Path:
    """Rewrite the run's JSONL file from the database (atomic replace)."""
    path = log_path(storage, run_id)
    tmp = path.with_suffix(".jsonl.tmp")
    with open_private(tmp, "w") as fh:
        for line in iter_events(engine, run_id):
            fh.write(json.dumps(line, ensure_ascii=False) + "\n")
    os.replace(tmp, path)
    return path


def sync_log(engine: Engine, storage: Storage, run_id: str) -> Path:
    """Make the run's JSONL file hold the database's events, in order.

    Lines are only ever appended after their events commit, so after a crash the file is
    the database's events minus at most a tail: its last line is found in the database
    (by its cycle, through the (run, cycle) index) and the events after it are appended.
    That reads the file's last line and the missing events, never the whole log: a resume
    at cycle 10,000 cost what one at cycle 10 does. A last line the database does not hold
    (a file edited, foreign or truncated mid-line) has the file rewritten from the database.
    """
    path = log_path(storage, run_id)
    if not path.exists():
        return rebuild_log(engine, storage, run_id)
    last = _last_line(path)
    if last is None:
        return rebuild_log(engine, storage, run_id)
    after = _event_id_of(engine, run_id, last) if last else 0
    if after is None:
        return rebuild_log(engine, storage, run_id)
    query = (
        select(events).where(events.c.run_id == run_id, events.c.id > after).order_by(events.c.id)
    )
    with engine.connect() as conn:
        missing = [as_line(run_id, dict(r)) for r in conn.execute(query).mappings()]
    if missing:
        append_lines(storage, run_id, missing)
    return path


TAIL_BYTES = 1_000_000
"""How much of the end of a log file is read to find its last line (one line is a few
kilobytes; a model answer of hundreds of kilobytes has the file rebuilt instead)."""


def _last_line(path: Path) -> dict[str, Any] | None:
    """The file's last line as JSON, `{}` for an empty file, None if it cannot be read."""
    size = path.stat().st_size
    if size == 0:
        return {}
    with path.open("rb") as fh:
        fh.seek(max(0, size - TAIL_BYTES))
        tail = fh.read()
    if not tail.endswith(b"\n"):
        return None  # cut mid-line
    lines = tail.splitlines()
    if not lines or (size > TAIL_BYTES and len(lines) < 2):
        return None
    try:
        line = json.loads(lines[-1])
    except ValueError:
        return None
    return line if isinstance(line, dict) and line else None


def _event_id_of(engine: Engine, run_id: str, line: dict[str, Any]) -> int | None:
    """The id of the run's event that `line` shows, or None if the database has none."""
    cycle = line.get("cycle_number")
    if not isinstance(cycle, int) or isinstance(cycle, bool):
        return None
    query = (
        select(events)
        .where(
            events.c.run_id == run_id,
            events.c.cycle == cycle,
            events.c.timestamp == str(line.get("timestamp")),
        )
        .order_by(events.c.id)
    )
    with engine.connect() as conn:
        for row in conn.execute(query).mappings():
            if as_line(run_id, dict(row)) == line:
                return int(row["id"])
    return None


def count_events(
    engine: Engine,
    run_id: str,
    *,
    key_prefix: str | None = None,
    event_type: str | None = None,
    cycle: int | None = None,
    limit: int | None = None,
) -> int:
    """How many of a run's events have keys starting with `key_prefix` / are of `event_type`.

    With `cycle`, only that cycle's events are read (through the (run, cycle) index).
    With `limit`, counting stops there (the answer is at most `limit`).
    """
    found = select(events.c.id).where(events.c.run_id == run_id)
    if cycle is not None:
        found = found.where(events.c.cycle == cycle)
    if key_prefix is not None:
        found = found.where(events.c.key.startswith(key_prefix, autoescape=True))
    if event_type is not None:
        found = found.where(events.c.event_type == event_type)
    if limit is not None:
        found = found.limit(limit)
    query = select(func.count()).select_from(found.subquery())
    with engine.connect() as conn:
        return int(conn.execute(query).scalar_one())


def numbered(engine: Engine, run_id: str, key_of: Callable[[int], str]) -> int:
    """How many of a run's numbered run-level events there are (`key_of(0)`, `key_of(1)`...).

    They are numbered without gaps (each is written with the count of those before it), so
    the count is the first number whose key is absent: found by doubling and halving, in
    O(log n) look-ups of the (run, key) index. Counting them by type read every event of
    the run: 68 ms for each `resume` at cycle 10,000.
    """
    query = select(events.c.key).where(events.c.run_id == run_id, events.c.key == bindparam("k"))
    with engine.connect() as conn:

        def present(n: int) -> bool:
            return conn.execute(query, {"k": key_of(n)}).first() is not None

        if not present(0):
            return 0
        low, high = 0, 1  # present(low), and high to find: the first absent
        while present(high):
            low, high = high, high * 2
        while high - low > 1:
            middle = (low + high) // 2
            low, high = (middle, high) if present(middle) else (low, middle)
        return high


def payload_of(engine: Engine, run_id: str, key: str) -> dict[str, Any] | None:
    """The payload of a run's event `key` (a run-level one, e.g. EXTENSIONS), or None."""
    query = select(events.c.payload).where(events.c.run_id == run_id, events.c.key == key)
    with engine.connect() as conn:
        raw = conn.execute(query).scalar_one_or_none()
    if raw is None:
        return None
    found = json.loads(raw) if isinstance(raw, str) else raw
    return found if isinstance(found, dict) else None
