"""The event log's schema: one payload class per event type, written and read back alike.

Writers build these payloads (`PAYLOADS`), readers (fork, metrics, a study's status) parse
them back, and a test holds the documented event table to them. Rows are stored by the
event store (`event_store`) and mirrored to a JSONL file (`event_mirror`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from typing import Any, ClassVar, Literal, Self

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
    NaN, not a number) and recorded as absent (see `contreact.ollama.server_numbers`)."""
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
    optional: ClassVar[frozenset[str]] = frozenset({"model_parameters", "rewritten_by"})
    step: int = 0
    call_id: str = ""
    tool_name: str = ""
    parameters: dict[str, Any] = field(default_factory=dict)
    """The arguments the call ran with (a hook's rewrite, if one rewrote them)."""
    output: str = ""
    error: bool = False
    refused: bool = False
    truncated: bool = False
    duration_s: float = 0.0
    model_parameters: dict[str, Any] | None = None
    """The arguments the model gave, when a hook rewrote them (else left out)."""
    rewritten_by: list[str] | None = None
    """The hooks that rewrote the arguments, in order (else left out)."""


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
