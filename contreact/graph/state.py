"""AgentState (checkpointed after every step) and Context (per invocation, never checkpointed).

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

# typing_extensions' TypedDict: LangGraph's schema builder rejects typing's before 3.12.
from typing_extensions import TypedDict

from contreact.checkpoints.storage import Storage, resolve_storage
from contreact.graph import defaults as d
from contreact.graph.defaults import ToolMode, default_model_options, default_ollama_host

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
    tool_mode: Literal["", "native", "text"] = ""
    """How this run's model gets its tools, decided once at its first step (the context's
    `tools`, for `auto` the model's capabilities) and kept, since the prompt depends on it:
    `text` describes the tools after the system prompt and sends tool results as user
    turns. Empty until decided."""
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
    tool_mode: Literal["", "native", "text"]
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


@dataclass(kw_only=True)
class Context:
    """How a run is executed; passed to every invocation, never checkpointed."""

    model: str = d.DEFAULT_MODEL
    ollama_host: str = field(default_factory=default_ollama_host)
    timeout_s: float = d.TIMEOUT_S
    """Per model call; ChatOllama waits forever by default."""
    retries: int = d.RETRIES
    """Retries of transient errors (connection, timeout, 5xx, 429) per model call."""
    retry_budget_s: float = d.RETRY_BUDGET_S
    """All retries of one call end within this many seconds."""
    keep_alive: str = d.KEEP_ALIVE
    model_options: dict[str, Any] = field(default_factory=default_model_options)
    """Ollama options (`num_ctx`, `temperature`, `seed`, ...), passed through."""
    reasoning: bool | str | None = None
    """Ask thinking models to think (`think`); thinking is logged, never reflected."""
    tools: ToolMode = d.TOOL_MODE
    """How tools reach the model (`native`, `text`, or `auto`: its capabilities decide)."""
    max_steps_per_cycle: int = d.MAX_STEPS_PER_CYCLE
    max_tool_calls_per_cycle: int = d.MAX_TOOL_CALLS_PER_CYCLE
    max_nudges: int = d.MAX_NUDGES
    tool_output_chars: int = d.TOOL_OUTPUT_CHARS
    memory_value_chars: int = d.MEMORY_VALUE_CHARS
    output_reserve_tokens: int = d.OUTPUT_RESERVE_TOKENS
    """Tokens of `num_ctx` kept free for the answer when the prompt is trimmed."""
    cycle_seconds: float | None = None
    """Wall-clock limit per cycle; past it tools are withdrawn and the cycle closes."""
    user_turn: str = d.USER_TURN
    """Each cycle's opening user turn (some models answer nothing without one)."""
    similarity_enabled: bool = d.SIMILARITY_ENABLED
    embedding_model: str | None = None
    similarity_moderate: float = d.SIMILARITY_MODERATE
    similarity_high: float = d.SIMILARITY_HIGH
    similarity_lexical_moderate: float = d.SIMILARITY_LEXICAL_MODERATE
    similarity_lexical_high: float = d.SIMILARITY_LEXICAL_HIGH
    reflection_schema: dict[str, Any] | None = None
    """None: a cycle's final answer is its reflection as written (`reflection.format:
    text`). A JSON schema: the final answer must be one JSON object fitting it, checked
    like tool arguments and stored as canonical JSON (`reflection.format: json`)."""
    data_dir: str = ""
    """Data directory; empty means `CONTREACT_HOME` or `./runs`."""
    storage_url: str = ""
    """Database URL; empty means the SQLite file in the data directory."""
    chat_model: Any = None
    """A LangChain chat model to call instead of ChatOllama (the in-process test tier);
    None, always outside tests: ChatOllama for `model` at `ollama_host`."""

    def as_config(self, run_id: str, cycles: int, task: str | None) -> dict[str, Any]:
        """The run config (YAML shape) this context runs, for registering a Studio run.

        Its operator policy is `queue`: Studio answers its own interrupts, and
        `contreact reply` can answer them too.
        """
        return {
            "run_id": run_id,
            "model": self.model,
            "cycles": cycles,
            "ollama": {
                "host": self.ollama_host,
                "timeout_s": self.timeout_s,
                "retries": self.retries,
                "retry_budget_s": self.retry_budget_s,
                "keep_alive": self.keep_alive,
                "reasoning": self.reasoning,
            },
            "model_options": dict(self.model_options),
            "limits": {
                "max_steps_per_cycle": self.max_steps_per_cycle,
                "max_tool_calls_per_cycle": self.max_tool_calls_per_cycle,
                "max_nudges": self.max_nudges,
                "tool_output_chars": self.tool_output_chars,
                "memory_value_chars": self.memory_value_chars,
                "output_reserve_tokens": self.output_reserve_tokens,
                "cycle_seconds": self.cycle_seconds,
            },
            "operator": {"mode": "queue"},
            "similarity": {
                "enabled": self.similarity_enabled,
                "embedding_model": self.embedding_model,
                "moderate": self.similarity_moderate,
                "high": self.similarity_high,
                "lexical_moderate": self.similarity_lexical_moderate,
                "lexical_high": self.similarity_lexical_high,
            },
            "reflection": (
                {"format": "json", "schema": self.reflection_schema}
                if self.reflection_schema is not None
                else {"format": "text"}
            ),
            "storage": {"data_dir": str(self.storage.data_dir), "url": self.storage.url},
            "task": task,
            "user_turn": self.user_turn,
            "tools": self.tools,
        }

    @cached_property
    def storage(self) -> Storage:
        """Where this run's data lives."""
        return resolve_storage(self.data_dir or None, self.storage_url or None)

    @property
    def num_ctx(self) -> int:
        """The context window asked of Ollama."""
        return int(self.model_options.get("num_ctx") or default_model_options()["num_ctx"])
