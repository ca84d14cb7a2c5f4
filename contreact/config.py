"""The YAML run configuration: pydantic models, loading, validation and CLI overrides.

A researcher's config is the record of an experiment, so it is strict: unknown keys are
errors with a "did you mean" hint, wrong types name the field and the file, and every
problem in the file is reported at once, not one per attempt.
"""

from __future__ import annotations

import difflib
import json
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from contreact.checkpoints.run_record import check_run_id
from contreact.graph import defaults as d
from contreact.graph.defaults import (
    CheckpointPolicy,
    ReflectionFormat,
    ToolMode,
    default_model_options,
    default_ollama_host,
    resolve_host,
)
from contreact.nodes.reflection_format import schema_problems
from contreact.ollama_options import check_model_options

if TYPE_CHECKING:
    from contreact.checkpoints.storage import Storage
    from contreact.graph.state import Context

DEFAULT_OPERATOR_REPLY = (
    "This is an automatic reply: the operator is not available right now and has read your message."
)


NO_REPLY_TEXT = "(The operator did not reply.)"


class ConfigError(Exception):
    """A config that cannot be used; the message names every bad field and the file."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True)


class OllamaSettings(_Strict):
    """How to reach Ollama."""

    host: str | None = Field(None, description="OLLAMA_HOST overrides when this is absent")
    hosts: list[str] | None = Field(
        None, description="several Ollama servers: a batch spreads its runs over them"
    )
    timeout_s: float = Field(d.TIMEOUT_S, gt=0)
    retries: int = Field(d.RETRIES, ge=0, le=20)
    retry_budget_s: float = Field(d.RETRY_BUDGET_S, gt=0)
    keep_alive: str = d.KEEP_ALIVE
    reasoning: bool | Literal["low", "medium", "high"] | None = Field(
        None, description="Ollama's think: true, false, or a level low | medium | high"
    )

    @field_validator("host")
    @classmethod
    def _host(cls, value: str | None) -> str | None:
        return resolve_host(value) if value and value.strip() else None

    @field_validator("hosts")
    @classmethod
    def _hosts(cls, value: list[str] | None) -> list[str] | None:
        return [resolve_host(h) for h in value] if value else value

    @field_validator("keep_alive", mode="before")
    @classmethod
    def _keep_alive_text(cls, value: Any) -> Any:
        return str(value) if isinstance(value, int | float) else value


class Limits(_Strict):
    """Per-cycle budgets and size limits."""

    max_steps_per_cycle: int = Field(d.MAX_STEPS_PER_CYCLE, ge=1)
    max_tool_calls_per_cycle: int = Field(d.MAX_TOOL_CALLS_PER_CYCLE, ge=0)
    max_nudges: int = Field(d.MAX_NUDGES, ge=0)
    tool_output_chars: int = Field(d.TOOL_OUTPUT_CHARS, ge=100)
    memory_value_chars: int = Field(d.MEMORY_VALUE_CHARS, ge=1)
    output_reserve_tokens: int = Field(d.OUTPUT_RESERVE_TOKENS, ge=0)
    cycle_seconds: float | None = Field(None, gt=0)


class OperatorSettings(_Strict):
    """Who answers `send_message_to_operator`.

    `auto` answers at once, unattended: with `no_reply` the no-reply text; else the next
    of `replies` (or of the lines of `replies_file`), in order; once they run out, `reply`.
    """

    mode: Literal["terminal", "auto", "queue"] = "auto"
    reply: str = DEFAULT_OPERATOR_REPLY
    replies: list[str] | None = None
    replies_file: str | None = None
    no_reply: bool = False

    def auto_reply(self, answered: int) -> str:
        """The `auto` reply to the operator message after `answered` earlier ones."""
        if self.no_reply:
            return NO_REPLY_TEXT
        if self.replies and answered < len(self.replies):
            return self.replies[answered]
        return self.reply


class SimilaritySettings(_Strict):
    """The reflection-similarity monitor."""

    enabled: bool = d.SIMILARITY_ENABLED
    embedding_model: str | None = None
    moderate: float = Field(d.SIMILARITY_MODERATE, ge=0, le=1)
    high: float = Field(d.SIMILARITY_HIGH, ge=0, le=1)
    """Thresholds for embedding cosine; the lexical fallback has its own (below)."""
    lexical_moderate: float = Field(d.SIMILARITY_LEXICAL_MODERATE, ge=0, le=1)
    lexical_high: float = Field(d.SIMILARITY_LEXICAL_HIGH, ge=0, le=1)


class PeiSettings(_Strict):
    """The PEI evaluation of this run (`contreact pei`)."""

    num_ctx: int = Field(d.PEI_NUM_CTX, ge=256)
    """The evaluator's context window; the rated history is fitted into it."""


REFLECTION_SCHEMA_FILE = Path(__file__).resolve().parent / "data" / "reflection_schema.json"
"""The default reflection schema: the paper's reflection/plan template (see its `$comment`)."""


@cache
def _bundled_schema_text() -> str:
    return REFLECTION_SCHEMA_FILE.read_text(encoding="utf-8")


def default_reflection_schema() -> dict[str, Any]:
    """A fresh copy of the bundled reflection schema."""
    schema: dict[str, Any] = json.loads(_bundled_schema_text())
    return schema


class ReflectionSettings(_Strict):
    """The form of a cycle's final answer, its reflection.

    `text` (the default) keeps it as written. `json` asks for one JSON object fitting
    `schema` (omitted: the bundled reflection/plan template), checked like tool arguments;
    the schema in force is written into the config, so the run's record names it and a
    resumed run keeps it whatever a later contreact bundles.
    """

    format: ReflectionFormat = d.REFLECTION_FORMAT
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


class StorageSettings(_Strict):
    """Where checkpoints, memory, registry and logs live."""

    data_dir: str | None = None
    url: str | None = None


class PersistenceSettings(_Strict):
    """How often the run's state is checkpointed."""

    checkpoints: CheckpointPolicy = d.CHECKPOINTS
    """`cycle` (default): once per cycle and at every pause; `step`: after every step."""


class Config(_Strict):
    """One run's configuration (SPEC §10)."""

    run_id: str
    model: str
    cycles: int = Field(10, ge=1)
    ollama: OllamaSettings = OllamaSettings()
    model_options: dict[str, Any] = Field(default_factory=default_model_options)
    limits: Limits = Limits()
    operator: OperatorSettings = OperatorSettings()
    similarity: SimilaritySettings = SimilaritySettings()
    storage: StorageSettings = StorageSettings()
    persistence: PersistenceSettings = PersistenceSettings()
    pei: PeiSettings = PeiSettings()
    reflection: ReflectionSettings = ReflectionSettings()
    task: str | None = None
    tools: ToolMode = d.TOOL_MODE
    """How tools reach the model: `native` (Ollama's `tools`), `text` (described after the
    system prompt, calls parsed from the answer) or `auto` (the model's capabilities decide)."""
    user_turn: str = d.USER_TURN
    batch: str | None = None
    """The batch this run belongs to (set by `contreact batch`)."""

    @field_validator("run_id")
    @classmethod
    def _run_id(cls, value: str) -> str:
        return check_run_id(value)

    @field_validator("model")
    @classmethod
    def _model(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must name an Ollama model, e.g. llama3.1:8b")
        return value.strip()

    @field_validator("model_options")
    @classmethod
    def _options(cls, value: dict[str, Any]) -> dict[str, Any]:
        problems = check_model_options(value)
        if problems:
            raise ValueError("; ".join(problems))
        merged = {**default_model_options(), **value}
        num_ctx = merged.get("num_ctx")
        if not isinstance(num_ctx, int) or isinstance(num_ctx, bool) or num_ctx < 256:
            raise ValueError(f"num_ctx must be an integer of at least 256, got {num_ctx!r}")
        return merged

    @property
    def host(self) -> str:
        """The Ollama server this run talks to."""
        if self.ollama.host:
            return self.ollama.host
        return self.ollama.hosts[0] if self.ollama.hosts else default_ollama_host()

    def pinned(self) -> Config:
        """This config with its Ollama host resolved now (from `OLLAMA_HOST` if unset).

        Stored with the run at its start, so that `resume` goes to the server the run
        began on whatever the shell's `OLLAMA_HOST` says by then.
        """
        return self.model_copy(
            update={"ollama": self.ollama.model_copy(update={"host": self.host})}
        )

    def to_context(self, storage: Storage | None = None) -> Context:
        """The runtime Context for this config, on `storage` (default: the config's own)."""
        from contreact.checkpoints.storage import resolve_storage
        from contreact.graph.state import Context

        if storage is None:
            storage = resolve_storage(self.storage.data_dir, self.storage.url)
        return Context(
            ollama_host=self.host,
            data_dir=str(storage.data_dir),
            storage_url=storage.url,
            model=self.model,
            timeout_s=self.ollama.timeout_s,
            retries=self.ollama.retries,
            retry_budget_s=self.ollama.retry_budget_s,
            keep_alive=self.ollama.keep_alive,
            reasoning=self.ollama.reasoning,
            # `seed: null` (an unseeded replicate) means: send no seed at all.
            model_options={k: v for k, v in self.model_options.items() if v is not None},
            tools=self.tools,
            max_steps_per_cycle=self.limits.max_steps_per_cycle,
            max_tool_calls_per_cycle=self.limits.max_tool_calls_per_cycle,
            max_nudges=self.limits.max_nudges,
            tool_output_chars=self.limits.tool_output_chars,
            memory_value_chars=self.limits.memory_value_chars,
            output_reserve_tokens=self.limits.output_reserve_tokens,
            cycle_seconds=self.limits.cycle_seconds,
            user_turn=self.user_turn,
            similarity_enabled=self.similarity.enabled,
            embedding_model=self.similarity.embedding_model,
            similarity_moderate=self.similarity.moderate,
            similarity_high=self.similarity.high,
            similarity_lexical_moderate=self.similarity.lexical_moderate,
            similarity_lexical_high=self.similarity.lexical_high,
            reflection_schema=self.reflection.schema_,
        )


def _model_at(path: tuple[Any, ...]) -> type[BaseModel] | None:
    model: type[BaseModel] | None = Config
    for part in path:
        if model is None or not isinstance(part, str) or part not in model.model_fields:
            return None
        annotation = model.model_fields[part].annotation
        model = (
            annotation
            if isinstance(annotation, type) and issubclass(annotation, BaseModel)
            else None
        )
    return model


def _describe(error: Any) -> str:
    loc = tuple(error["loc"])
    name = ".".join(str(p) for p in loc) or "(top level)"
    if error["type"] == "extra_forbidden":
        parent = _model_at(loc[:-1])
        hint = ""
        if parent is not None:
            close = difflib.get_close_matches(
                str(loc[-1]),
                [f.alias or n for n, f in parent.model_fields.items()],
                n=1,
                cutoff=0.5,
            )
            if close:
                prefix = ".".join(str(p) for p in loc[:-1])
                hint = f" (did you mean `{prefix + '.' if prefix else ''}{close[0]}`?)"
        return f"unknown key `{name}`{hint}"
    if error["type"] == "missing":
        return f"`{name}` is required"
    got = error.get("input")
    shown = f" (got {got!r})" if got is not None and not isinstance(got, dict | list) else ""
    message = str(error["msg"]).removeprefix("Value error, ")
    return f"`{name}`: {message}{shown}"


def parse_config(data: Any, source: str = "<config>") -> Config:
    """Validate a loaded mapping; raises `ConfigError` naming every bad field and `source`."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the config must be a YAML mapping of keys to values")
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(_describe(e) for e in exc.errors())
        raise ConfigError(f"{source}: {problems}") from None


def load_config(path: str | Path, overrides: dict[str, Any] | None = None) -> Config:
    """Read a YAML config, apply CLI overrides (`model`, `cycles`, `run_id`, `host`), validate."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config {file}: {exc.strerror or exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(
            f"{file}:{where} is not valid YAML: {getattr(exc, 'problem', exc)}"
        ) from None
    if data is None:
        data = {}
    if isinstance(data, dict):
        data = apply_overrides(data, overrides or {})
        data = _read_replies_file(data, file)
    return parse_config(data, str(file))


def _read_replies_file(data: dict[str, Any], config_file: Path) -> dict[str, Any]:
    """Inline `operator.replies_file` as `operator.replies`, so a resumed run needs no file."""
    operator = data.get("operator")
    if not isinstance(operator, dict) or not operator.get("replies_file"):
        return data
    path = Path(str(operator["replies_file"]))
    if not path.is_absolute():
        path = config_file.parent / path
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ConfigError(
            f"{config_file}: `operator.replies_file`: cannot read {path} ({exc.strerror or exc})"
        ) from None
    replies = [line.strip() for line in lines if line.strip()]
    return {**data, "operator": {**operator, "replies": replies, "replies_file": str(path)}}


def apply_overrides(data: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """CLI flags over the file's values (None means the flag was not given)."""
    merged = dict(data)
    for key in ("model", "cycles", "run_id"):
        if overrides.get(key) is not None:
            merged[key] = overrides[key]
    if overrides.get("host") is not None:
        ollama = dict(merged.get("ollama") or {})
        ollama["host"] = overrides["host"]
        merged["ollama"] = ollama
    return merged


def deep_merge(base: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """`base` with `changes` applied; nested mappings merge, other values replace."""
    merged = dict(base)
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged
