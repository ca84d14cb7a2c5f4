"""AgentState (checkpointed) and Context (per invocation, never checkpointed).

The split follows LangGraph's `context_schema`: what the agent *is* at a point in time
(cycle, this cycle's messages, counters) is state and survives crashes; how it is *run*
(model, host, timeouts, budgets, storage) is context and may change on resume (a fixed
host, a longer timeout) without rewriting history.

State holds only what is bounded per cycle. Reflections of earlier cycles live in the
cycles table (see `checkpoints.cycles`): every checkpoint re-serializes every state field,
so a growing list here would make storage per cycle grow with the run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Annotated, Any, Literal

from langchain_core.messages import AnyMessage, RemoveMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES, add_messages
from pydantic import ConfigDict, Field
from pydantic.json_schema import SkipJsonSchema

# typing_extensions' TypedDict: LangGraph's schema builder rejects typing's before 3.12.
from typing_extensions import TypedDict

from contreact.checkpoints.storage import Storage, resolve_storage
from contreact.config import Settings

Outcome = Literal["", "calls", "retry", "final"]
GraphStatus = Literal["running", "completed"]
"""Whether the graph has cycles left; the registry's `RunStatus` says more (paused, failed)."""


class PendingCall(TypedDict):
    """A parsed tool call waiting for `dispatch`."""

    id: str
    name: str
    args: dict[str, Any]
    error: str | None
    """Corrective text instead of running (unknown tool, bad arguments), from the parser."""


class CycleStats(TypedDict):
    """Per-cycle counters; reset when a cycle starts, reported in CYCLE_END."""

    steps: int
    """Model calls made in this cycle (corrective turns and nudges included)."""
    tool_calls: int
    """Every call the model made: run, refused and invalid ones."""
    tool_calls_by_name: dict[str, int]
    nudges: int
    repeated_calls: int
    errors: int
    """Tool calls that returned an error, plus malformed or invalid calls."""
    memory_ops_total: int
    memory_write_chars: int
    messages_to_operator: int
    response_chars: int
    tokens_in: int
    tokens_out: int
    model_seconds: float
    trims: int
    out_of_time: bool
    """The cycle's wall-clock limit passed: tools are withdrawn, the next answer closes it."""


def new_stats() -> CycleStats:
    """Counters for a cycle that has not started yet."""
    return CycleStats(
        steps=0,
        tool_calls=0,
        tool_calls_by_name={},
        nudges=0,
        repeated_calls=0,
        errors=0,
        memory_ops_total=0,
        memory_write_chars=0,
        messages_to_operator=0,
        response_chars=0,
        tokens_in=0,
        tokens_out=0,
        model_seconds=0.0,
        trims=0,
        out_of_time=False,
    )


@dataclass(kw_only=True)
class AgentState:
    """The checkpointed state of one run."""

    run_id: str = ""
    """Human run id; memory, events and the journal are keyed by it. Empty: the thread id."""
    lineage: str = ""
    """Which branch of the run this state is on: empty on the run's main line, a new value
    after every fork point (a state edit, time travel, a copied thread); see
    `checkpoints.lineage`. Journal, events, memory and cycles are keyed by run id and
    lineage, so a branch never replays or changes another branch's side effects."""
    task: str | None = None
    """A user task (tasked mode) instead of the task-free prompt; None for ContReAct."""
    tool_mode: Literal["", "native", "text", "constrained"] = ""
    """How this run's model gets its tools, decided once at its first step (the context's
    `tools`, for `auto` the model's capabilities) and kept, since the prompt depends on it:
    `text` describes the tools after the system prompt and sends tool results as user
    turns; `constrained` does the same and holds each answer to a JSON schema (Ollama's
    `format`). Empty until decided."""
    last_cycle: int = 1
    """The run ends after this cycle; `resume --cycles N` raises it."""
    cycle: int = 1
    """The current cycle, 1-based."""
    opening: str | None = None
    """This cycle's opening user turn when given explicitly (a chat turn, the PEI
    question); None means the `user_turn` template of the context."""
    messages: Annotated[list[AnyMessage], add_messages] = field(default_factory=list)
    """This cycle's messages only, starting with its opening user turn."""
    reflections_from: int = 1
    """First earlier cycle whose reflection fits in the prompt (older ones trimmed)."""
    pending: list[PendingCall] = field(default_factory=list)
    """Calls parsed from the last model message, for `dispatch`."""
    outcome: Outcome = ""
    """What `parse` made of the last model message; the router reads it."""
    final_text: str = ""
    """The cycle's reflection as accepted by `parse` (thinking stripped)."""
    flags: list[str] = field(default_factory=list)
    """Notes about how this cycle ended (e.g. `empty_reflection`, `step_budget_exhausted`)."""
    stats: CycleStats = field(default_factory=new_stats)
    call_counts: dict[str, int] = field(default_factory=dict)
    """How often each (tool, arguments) signature was called this cycle."""
    advisory: str | None = None
    """Diversity advisory from the similarity monitor, for this cycle's system prompt only."""
    cycle_started: float = 0.0
    """Wall-clock time (epoch seconds) the cycle opened; for the per-cycle time limit."""
    status: GraphStatus = "running"


class RunInput(TypedDict, total=False):
    """What a run started in LangGraph Studio asks for (the input form)."""

    run_id: str
    """The run's name; it is registered under it (another thread with it is refused)."""
    last_cycle: int
    """How many cycles to run."""
    task: str | None
    """A user task (tasked mode); leave empty for a task-free run."""


class StateUpdate(TypedDict, total=False):
    """What a node may return: any subset of `AgentState`'s fields, typed as they are there.

    `messages` is appended to (`add_messages`; a `RemoveMessage` clears the list); every
    other field is replaced.
    """

    run_id: str
    lineage: str
    task: str | None
    tool_mode: Literal["", "native", "text", "constrained"]
    last_cycle: int
    cycle: int
    opening: str | None
    messages: Sequence[AnyMessage | RemoveMessage]
    reflections_from: int
    pending: list[PendingCall]
    outcome: Outcome
    final_text: str
    flags: list[str]
    stats: CycleStats
    call_counts: dict[str, int]
    advisory: str | None
    cycle_started: float
    status: GraphStatus


def fresh_cycle(cycle: int, advisory: str | None = None, opening: str | None = None) -> StateUpdate:
    """The state update that starts `cycle`: messages and counters reset."""
    return {
        "cycle": cycle,
        "opening": opening,
        "messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES)],
        "reflections_from": 1,
        "pending": [],
        "outcome": "",
        "final_text": "",
        "flags": [],
        "stats": new_stats(),
        "call_counts": {},
        "advisory": advisory,
        "cycle_started": 0.0,
        "status": "running",
    }


class Context(Settings):
    """How a run is executed: its validated settings, per invocation, never checkpointed.

    The same model as a run config's settings (`contreact.config.Settings`, the one place
    their defaults live), so Studio's context form takes a config's keys (`model`,
    `ollama: {host, timeout_s}`, `limits`, ...). Frozen: a node cannot change how the run
    is executed.
    """

    model_config = ConfigDict(extra="forbid", validate_default=True, frozen=True)

    chat_model: SkipJsonSchema[Any] = Field(None, exclude=True)
    """A LangChain chat model to call instead of ChatOllama (the in-process test tier);
    None, always outside tests: ChatOllama for `model` at the run's host."""
    persistence_backend: SkipJsonSchema[Any] = Field(None, exclude=True)
    """The storage the nodes go through (`checkpoints.persistence.Persistence`; the
    in-memory one in the nodes' unit tests); None, always outside tests: the database of
    `storage`."""
    extensions: SkipJsonSchema[Any] = Field(None, exclude=True)
    """Tools and hooks handed over from Python (`contreact.run(config, tools=, hooks=)`):
    `{"tools": [...], "hooks": [...]}`; None: only those the config names."""

    @classmethod
    def of(cls, settings: Settings, storage: Storage | None = None) -> Context:
        """The context that executes `settings`, on `storage` (default: the settings' own)."""
        data = settings.settings_data()
        if storage is not None:
            data["storage"] = {"data_dir": str(storage.data_dir), "url": storage.url}
        return cls.model_validate(data)

    @cached_property
    def store(self) -> Storage:
        """Where this run's data lives (the `storage` section resolved)."""
        return resolve_storage(self.storage.data_dir, self.storage.url)
