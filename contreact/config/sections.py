"""The sections of a run's settings: Ollama, limits, operator, similarity, PEI, reflection.

Every default of a run is declared once, on these pydantic sections; `contreact.config`
puts them together into the settings, run and batch configs.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from contreact.ollama.hosts import resolve_host
from contreact.text.reflection_format import schema_problems

ToolMode = Literal["auto", "native", "text", "constrained"]
"""`auto`: the model's capabilities (`/api/show`) decide between native and text tools;
`constrained`: text tools, each answer held to a JSON schema by Ollama's `format`."""


CheckpointPolicy = Literal["step", "cycle"]


ReflectionFormat = Literal["text", "json"]
"""`text`: a cycle's final answer is its note as written; `json`: one JSON object fitting
the reflection schema (by default the paper's reflection/plan template)."""


DEFAULT_MODEL_OPTIONS: dict[str, Any] = {"temperature": 0.6, "seed": 42, "num_ctx": 8192}
"""Options passed to Ollama when the config gives none; a config's own are merged over them."""


DEFAULT_OPERATOR_REPLY = (
    "This is an automatic reply: the operator is not available right now and has read your message."
)


NO_REPLY_TEXT = "(The operator did not reply.)"


class Strict(BaseModel):
    """A settings section: unknown keys are errors, defaults are validated too."""

    model_config = ConfigDict(extra="forbid", validate_default=True)


class OllamaSettings(Strict):
    """How to reach Ollama."""

    host: str | None = Field(None, description="OLLAMA_HOST overrides when this is absent")
    hosts: list[str] | None = Field(
        None, description="several Ollama servers: a batch spreads its runs over them"
    )
    parallel: dict[str, int] | None = Field(
        None,
        description="runs each host serves at once (its OLLAMA_NUM_PARALLEL), by host; "
        "a `hosts` entry `{url: ..., parallel: N}` sets it too",
    )
    """A study's queue places runs on the host with the most free slots; none given: a
    host takes any number and runs go to the least busy."""
    timeout_s: float = Field(120.0, gt=0)
    """Deadline of one attempt at a model call: first byte, every chunk and the total."""
    retries: int = Field(4, ge=0, le=20)
    """Retries of transient errors (connection, timeout, 5xx, 429) per model call."""
    retry_budget_s: float = Field(60.0, gt=0)
    """All retries of one call end within this many seconds."""
    keep_alive: str = "5m"
    reasoning: bool | Literal["low", "medium", "high"] | None = Field(
        None, description="Ollama's think: true, false, or a level low | medium | high"
    )

    @field_validator("host")
    @classmethod
    def _host(cls, value: str | None) -> str | None:
        return resolve_host(value) if value and value.strip() else None

    @model_validator(mode="before")
    @classmethod
    def _host_entries(cls, data: Any) -> Any:
        """`hosts` entries may be `{url, parallel}`: the slots go to `parallel`."""
        if not isinstance(data, dict) or not isinstance(data.get("hosts"), list):
            return data
        entries = data["hosts"]
        if not any(isinstance(e, dict) for e in entries):
            return data
        slots = dict(data.get("parallel") or {})
        hosts = []
        for entry in entries:
            if isinstance(entry, dict):
                unknown = set(entry) - {"url", "parallel"}
                if unknown or "url" not in entry:
                    raise ValueError(
                        "a `hosts` entry is a URL or {url: URL, parallel: N}, not "
                        + ", ".join(sorted(map(str, entry)))
                    )
                hosts.append(entry["url"])
                if "parallel" in entry:
                    slots[entry["url"]] = entry["parallel"]
            else:
                hosts.append(entry)
        return {**data, "hosts": hosts, "parallel": slots or None}

    @field_validator("hosts")
    @classmethod
    def _hosts(cls, value: list[str] | None) -> list[str] | None:
        return [resolve_host(h) for h in value] if value else value

    @field_validator("parallel")
    @classmethod
    def _slots(cls, value: dict[str, int] | None) -> dict[str, int] | None:
        if not value:
            return None
        if any(n < 1 for n in value.values()):
            raise ValueError("a host's `parallel` must be at least 1")
        return {resolve_host(h): n for h, n in value.items()}

    @field_validator("keep_alive", mode="before")
    @classmethod
    def _keep_alive_text(cls, value: Any) -> Any:
        return str(value) if isinstance(value, int | float) else value


class Limits(Strict):
    """Per-cycle budgets and size limits."""

    max_steps_per_cycle: int = Field(10, ge=1)
    max_tool_calls_per_cycle: int = Field(20, ge=0)
    max_nudges: int = Field(2, ge=0)
    tool_output_chars: int = Field(8000, ge=100)
    memory_value_chars: int = Field(50_000, ge=1)
    output_reserve_tokens: int = Field(1024, ge=0)
    """Tokens of `num_ctx` kept free for the answer when the prompt is trimmed."""
    cycle_seconds: float | None = Field(None, gt=0)
    """Wall-clock limit per cycle; past it tools are withdrawn and the cycle closes."""


class OperatorSettings(Strict):
    """Who answers `send_message_to_operator`.

    `auto` answers at once, unattended: with `no_reply` the no-reply text; else the next
    of `replies` (or of the lines of `replies_file`), in order; once they run out, `reply`.
    """

    mode: Literal["terminal", "auto", "queue"] = "auto"
    reply: str = DEFAULT_OPERATOR_REPLY
    replies: list[str] | None = None
    replies_file: str | None = None
    no_reply: bool = False

    def auto_reply(self, answered: Callable[[int], int]) -> str:
        """The `auto` reply to the operator message after `answered(n)` earlier ones.

        `answered(n)` counts the run's earlier messages up to `n`: only a list of replies
        needs the count, and only until the list is handed out (counting them read every
        event of the run, each time the agent wrote to the operator).
        """
        if self.no_reply:
            return NO_REPLY_TEXT
        if self.replies and (n := answered(len(self.replies))) < len(self.replies):
            return self.replies[n]
        return self.reply


class SimilaritySettings(Strict):
    """The reflection-similarity monitor."""

    enabled: bool = True
    embedding_model: str | None = None
    moderate: float = Field(0.7, ge=0, le=1)
    high: float = Field(0.8, ge=0, le=1)
    """Thresholds for embedding cosine; the lexical fallback has its own (below)."""
    # The lexical fallback's scores run lower than embeddings' (a paraphrase shares few
    # character n-grams): its thresholds are calibrated on tests/data/similarity_pairs.yaml
    # (see `contreact.nodes.similarity`).
    lexical_moderate: float = Field(0.26, ge=0, le=1)
    lexical_high: float = Field(0.75, ge=0, le=1)
    recent: int = Field(100, ge=1)
    """A reflection is compared with this many newest earlier ones, and with the older
    ones its index keys find (`per_key` per key): a check costs the same all run long."""
    per_key: int = Field(4, ge=0)
    """Older reflections taken per index key (the newest that share it); 0: recent only."""


class PeiSettings(Strict):
    """The PEI evaluation of this run (`contreact pei`)."""

    num_ctx: int = Field(32768, ge=256)
    """The evaluator's context window (room for a 10-cycle paper-length history); the rated
    history is fitted into it."""
    temperature: float = Field(0.0, ge=0)
    """The evaluator's sampling temperature: its own, never the rated run's. 0 (greedy): an
    evaluator is an instrument, and the same history should get the same answer."""
    seed: int | None = 42
    """The evaluator's seed (`null` sends none)."""

    @property
    def options(self) -> dict[str, Any]:
        """The Ollama options sent with each PEI question (a `null` seed is not sent)."""
        sent = {"temperature": self.temperature, "seed": self.seed, "num_ctx": self.num_ctx}
        return {k: v for k, v in sent.items() if v is not None}


REFLECTION_SCHEMA_FILE = Path(__file__).resolve().parents[1] / "data" / "reflection_schema.json"
"""The default reflection schema: the paper's reflection/plan template (see its `$comment`)."""


@cache
def _bundled_schema_text() -> str:
    return REFLECTION_SCHEMA_FILE.read_text(encoding="utf-8")


def default_reflection_schema() -> dict[str, Any]:
    """A fresh copy of the bundled reflection schema."""
    schema: dict[str, Any] = json.loads(_bundled_schema_text())
    return schema


class ReflectionSettings(Strict):
    """The form of a cycle's final answer, its reflection.

    `text` (the default) keeps it as written. `json` asks for one JSON object fitting
    `schema` (omitted: the bundled reflection/plan template), checked like tool arguments;
    the schema in force is written into the config, so the run's record names it and a
    resumed run keeps it whatever a later contreact bundles.
    """

    format: ReflectionFormat = "text"
    schema_: dict[str, Any] | None = Field(None, alias="schema")

    model_config = ConfigDict(
        extra="forbid", validate_default=True, validate_by_name=True, serialize_by_alias=True
    )

    @field_validator("schema_", mode="before")
    @classmethod
    def _schema(cls, value: Any) -> Any:
        if value is None:
            return None
        problems = schema_problems(value)
        if problems:
            raise ValueError("not a usable reflection schema: " + "; ".join(problems))
        return value

    @model_validator(mode="after")
    def _schema_in_force(self) -> ReflectionSettings:
        if self.format == "text" and self.schema_ is not None:
            raise ValueError("`schema` needs `format: json` (a text reflection has no schema)")
        if self.format == "json" and self.schema_ is None:
            self.schema_ = default_reflection_schema()
        return self


class StorageSettings(Strict):
    """Where checkpoints, memory, registry and logs live."""

    data_dir: str | None = None
    url: str | None = None


class PersistenceSettings(Strict):
    """How often the run's state is checkpointed."""

    checkpoints: CheckpointPolicy = "cycle"
    """`cycle` (default): one checkpoint per cycle (and at every pause); the journal replays
    an unfinished cycle's steps on resume. `step`: a checkpoint after every step (Studio time
    travel to any step of a CLI run). See docs on persistence for the figures behind it."""
