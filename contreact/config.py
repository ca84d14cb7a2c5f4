"""The run configuration: the one pydantic model of a run's settings, loading and validation.

Every default of a run is declared here, once, on the pydantic sections: the YAML config,
the graph's runtime context (`graph.state.Context` is a `Settings`), a run started in
Studio and a batch all read them from these models.

A researcher's config is the record of an experiment, so it is strict: unknown keys are
errors with a "did you mean" hint, wrong types name the field and the file, and every
problem in the file is reported at once, not one per attempt.
"""

from __future__ import annotations

import difflib
import ipaddress
import json
import os
import re
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any, Literal, TypeVar, get_args, get_origin
from urllib.parse import urlsplit

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
from contreact.ollama.credentials import hide_credentials, remember, split_credentials
from contreact.ollama.options import check_model_options
from contreact.text.messages import cut
from contreact.text.reflection_format import schema_problems

ToolMode = Literal["auto", "native", "text", "constrained"]
"""`auto`: the model's capabilities (`/api/show`) decide between native and text tools;
`constrained`: text tools, each answer held to a JSON schema by Ollama's `format`."""
CheckpointPolicy = Literal["step", "cycle"]
ReflectionFormat = Literal["text", "json"]
"""`text`: a cycle's final answer is its note as written; `json`: one JSON object fitting
the reflection schema (by default the paper's reflection/plan template)."""

DEFAULT_OLLAMA_PORT = 11434

M = TypeVar("M", bound=BaseModel)


def resolve_host(value: str | None) -> str:
    """The base URL a host setting means, read exactly as Ollama's own client reads it.

    Ollama servers are usually configured with `OLLAMA_HOST=0.0.0.0` or `127.0.0.1`: no
    scheme and no port. The `ollama` Python client (`ollama._client._parse_host`) takes a
    missing scheme as http, a missing port as 11434 (80/443 only when the scheme is given),
    `:PORT` alone as 127.0.0.1, brackets IPv6 addresses and keeps a path prefix (a proxy).
    Every place that reaches Ollama (run, resume, doctor, batch, chat) resolves through here.
    A `user:password@` is taken out and remembered for this process only (sent as Basic
    auth, never recorded: `contreact.ollama.credentials`).
    """
    text, credentials = split_credentials(value or "")
    port = DEFAULT_OLLAMA_PORT
    scheme, _, hostport = text.partition("://")
    if not hostport:
        scheme, hostport = "http", text
    elif scheme == "http":
        port = 80
    elif scheme == "https":
        port = 443
    split = urlsplit(f"{scheme}://{hostport}")
    host = split.hostname or "127.0.0.1"
    try:
        port = split.port or port
    except ValueError:
        raise ValueError(f"host {text!r} has an invalid port") from None
    try:
        if isinstance(ipaddress.ip_address(host), ipaddress.IPv6Address):
            host = f"[{host}]"
    except ValueError:
        pass
    path = split.path.strip("/")
    resolved = f"{scheme}://{host}:{port}/{path}" if path else f"{scheme}://{host}:{port}"
    if credentials is not None:
        remember(resolved, credentials)
    return resolved


def default_ollama_host() -> str:
    """`OLLAMA_HOST` as Ollama's client reads it, else Ollama's local default."""
    return resolve_host(os.environ.get("OLLAMA_HOST"))


DEFAULT_MODEL_OPTIONS: dict[str, Any] = {"temperature": 0.6, "seed": 42, "num_ctx": 8192}
"""Options passed to Ollama when the config gives none; a config's own are merged over them."""

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


class Limits(_Strict):
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


class SimilaritySettings(_Strict):
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


class PeiSettings(_Strict):
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


IMPORT_PATH = r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$"
"""`package.module:name`, the form entry points use, for a tool or a hook."""


class ToolSettings(_Strict):
    """Which tools the model gets and how they reach it.

    The old string form (`tools: text`) is accepted as `tools: {mode: text}`.
    """

    mode: ToolMode = "auto"
    """`native` (Ollama's `tools`), `text` (described after the system prompt, calls parsed
    from the answer), `constrained` (as `text`, and Ollama's `format` admits only one tool
    call or the final answer) or `auto` (the model's capabilities decide)."""
    add: list[str] = Field(default_factory=list)
    """Your own tools, as `package.module:function` (entry points in the `contreact.tools`
    group are added too)."""
    disable: list[str] = Field(default_factory=list)
    """Built-in tools the model does not get, by name (`delete`, `write`, ...)."""
    entry_points: bool = True
    """Add the tools installed packages declare in the `contreact.tools` entry-point group."""

    @model_validator(mode="before")
    @classmethod
    def _string_form(cls, value: Any) -> Any:
        return {"mode": value} if isinstance(value, str) else value

    @field_validator("add")
    @classmethod
    def _paths(cls, value: list[str]) -> list[str]:
        return _import_paths(value)

    @field_validator("disable")
    @classmethod
    def _builtins(cls, value: list[str]) -> list[str]:
        unknown = [name for name in value if name not in BUILTIN_TOOLS]
        if unknown:
            hints = []
            for name in unknown:
                close = difflib.get_close_matches(name, BUILTIN_TOOLS, n=1, cutoff=0.5)
                hints.append(f"{name!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
            raise ValueError(
                f"no built-in tool {', '.join(hints)}; the built-ins are {', '.join(BUILTIN_TOOLS)}"
            )
        return value


BUILTIN_TOOLS = ("write", "read", "list", "delete", "pattern_search", "send_message_to_operator")
"""The built-in tools' names (`tools.registry.TOOLS` holds them; a test keeps the two equal)."""


def _import_paths(value: list[str]) -> list[str]:
    bad = [p for p in value if not re.match(IMPORT_PATH, p.strip())]
    if bad:
        raise ValueError(f"{', '.join(repr(p) for p in bad)}: name it as `package.module:name`")
    return [p.strip() for p in value]


class MemoryChange(_Strict):
    """A memory change an intervention makes."""

    clear: bool = False
    """Delete every memory of the run."""


class ToolFailure(_Strict):
    """Calls of `tool` fail with `error` instead of running."""

    tool: str = Field(min_length=1)
    error: str = Field(min_length=1)


class Intervention(_Strict):
    """One change to a run at a cycle, made without code; applied once, recorded as an event.

    When: `at_cycle` (one cycle) or `cycles` (a list). What: one of `operator_message` (a
    message from the operator, added to the cycle's opening turn), `memory` (`clear: true`
    deletes every memory as the cycle opens) or `tool_fails` (every call of that tool in
    those cycles returns the error instead of running).
    """

    at_cycle: int | None = Field(None, ge=1)
    cycles: list[int] | None = None
    operator_message: str | None = None
    memory: MemoryChange | None = None
    tool_fails: ToolFailure | None = None

    @model_validator(mode="after")
    def _one_of_each(self) -> Intervention:
        if (self.at_cycle is None) == (self.cycles is None):
            raise ValueError("give exactly one of `at_cycle` and `cycles`")
        if self.cycles is not None and (not self.cycles or min(self.cycles) < 1):
            raise ValueError("`cycles` lists cycle numbers of at least 1")
        kinds = [k for k in ("operator_message", "memory", "tool_fails") if getattr(self, k)]
        if len(kinds) != 1:
            raise ValueError(
                "give exactly one of `operator_message`, `memory` and `tool_fails`"
                + (f" (got {', '.join(kinds)})" if kinds else "")
            )
        if self.memory is not None and not self.memory.clear:
            raise ValueError("`memory` needs `clear: true` (the one memory change there is)")
        return self

    @property
    def kind(self) -> str:
        """`operator_message`, `memory` or `tool_fails`."""
        if self.operator_message is not None:
            return "operator_message"
        return "memory" if self.memory is not None else "tool_fails"

    def applies_to(self, cycle: int) -> bool:
        """Whether this intervention acts in `cycle`."""
        return cycle == self.at_cycle or cycle in (self.cycles or [])


class StorageSettings(_Strict):
    """Where checkpoints, memory, registry and logs live."""

    data_dir: str | None = None
    url: str | None = None


class PersistenceSettings(_Strict):
    """How often the run's state is checkpointed."""

    checkpoints: CheckpointPolicy = "cycle"
    """`cycle` (default): one checkpoint per cycle (and at every pause); the journal replays
    an unfinished cycle's steps on resume. `step`: a checkpoint after every step (Studio time
    travel to any step of a CLI run). See docs on persistence for the figures behind it."""


class Settings(_Strict):
    """How a run is executed: every section of a run config but the run's identity.

    The graph's runtime context is one of these (`graph.state.Context`), so a run started
    from a YAML config and one started in Studio read the same defaults.
    """

    model: str = "llama3.1:8b"
    ollama: OllamaSettings = OllamaSettings()
    model_options: dict[str, Any] = Field(default_factory=lambda: dict(DEFAULT_MODEL_OPTIONS))
    """Ollama options (`num_ctx`, `temperature`, `seed`, ...), passed through; `seed: null`
    (an unseeded replicate) sends no seed."""
    limits: Limits = Limits()
    operator: OperatorSettings = OperatorSettings()
    similarity: SimilaritySettings = SimilaritySettings()
    storage: StorageSettings = StorageSettings()
    persistence: PersistenceSettings = PersistenceSettings()
    pei: PeiSettings = PeiSettings()
    reflection: ReflectionSettings = ReflectionSettings()
    tools: ToolSettings = ToolSettings()
    """Which tools the model gets (built-ins, your own) and how they reach it."""
    hooks: list[str] = Field(default_factory=list)
    """Objects called at points of the run, as `package.module:object` (`nodes.hooks`)."""
    interventions: list[Intervention] = Field(default_factory=list)
    """Changes made at given cycles without code (an operator message, a memory wipe, a
    failing tool), each applied exactly once."""
    user_turn: str = "Cycle {cycle} begins."
    """Each cycle's opening user turn (some models answer nothing without one)."""

    @field_validator("model")
    @classmethod
    def _model(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must name an Ollama model, e.g. llama3.1:8b")
        return value.strip()

    @field_validator("hooks")
    @classmethod
    def _hooks(cls, value: list[str]) -> list[str]:
        return _import_paths(value)

    @field_validator("model_options")
    @classmethod
    def _options(cls, value: dict[str, Any]) -> dict[str, Any]:
        problems = check_model_options(value)
        if problems:
            raise ValueError("; ".join(problems))
        merged = {**DEFAULT_MODEL_OPTIONS, **value}
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

    @property
    def num_ctx(self) -> int:
        """The context window asked of Ollama."""
        return int(self.model_options["num_ctx"])

    @property
    def sent_options(self) -> dict[str, Any]:
        """The options sent to Ollama: `seed: null` (an unseeded replicate) sends no seed."""
        return {k: v for k, v in self.model_options.items() if v is not None}

    @property
    def reflection_schema(self) -> dict[str, Any] | None:
        """The schema a structured reflection must fit; None for text reflections."""
        return self.reflection.schema_

    def settings_data(self) -> dict[str, Any]:
        """These settings alone, as plain data (no run identity), for a `Settings` subclass."""
        return self.model_dump(include=set(Settings.model_fields), by_alias=True)


class _Runs(Settings):
    """What a run config and a batch config share beyond the settings: how long, which task."""

    cycles: int = Field(10, ge=1)
    task: str | None = None
    """A user task (tasked mode) instead of the task-free prompt; None for ContReAct."""


class Config(_Runs):
    """One run's configuration: its settings plus the run's identity (every key: docs/config.md)."""

    run_id: str
    model: str
    batch: str | None = None
    """The batch this run belongs to (set by `contreact batch`)."""

    @field_validator("run_id")
    @classmethod
    def _run_id(cls, value: str) -> str:
        return check_run_id(value)

    def pinned(self) -> Config:
        """This config with its Ollama host resolved now (from `OLLAMA_HOST` if unset).

        Stored with the run at its start, so that `resume` goes to the server the run
        began on whatever the shell's `OLLAMA_HOST` says by then.
        """
        return self.model_copy(
            update={"ollama": self.ollama.model_copy(update={"host": self.host})}
        )


class ModelEntry(_Strict):
    """One model of a batch, with settings for its runs only (a bare name has none)."""

    name: str = Field(min_length=1)
    model_options: dict[str, Any] | None = None
    reasoning: bool | Literal["low", "medium", "high"] | None = None
    num_ctx: int | None = Field(None, ge=256)
    """Shorthand for `model_options.num_ctx`."""

    def changes(self) -> dict[str, Any]:
        """What this entry changes in its runs' config."""
        own: dict[str, Any] = {}
        if self.model_options is not None:
            own["model_options"] = dict(self.model_options)
        if self.num_ctx is not None:
            own.setdefault("model_options", {})["num_ctx"] = self.num_ctx
        if "reasoning" in self.model_fields_set:
            own["ollama"] = {"reasoning": self.reasoning}
        return own


class BatchConfig(_Runs):
    """A batch: one run config's settings, run for each of `models`, `replicates` times."""

    batch: str | None = None
    """The batch's name (default: the config file's name); runs are `<batch>.<model>.r<N>`."""
    models: list[ModelEntry] = Field(min_length=1)
    replicates: int = Field(1, ge=1)
    parallel: int = Field(1, ge=1)
    """How many runs go at once."""

    @field_validator("models", mode="before")
    @classmethod
    def _names(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [{"name": m} if isinstance(m, str) else m for m in value]
        return value

    @property
    def hosts(self) -> list[str]:
        """The Ollama servers the batch spreads its runs over (none given: the default's)."""
        if self.ollama.hosts:
            return list(self.ollama.hosts)
        return [self.ollama.host] if self.ollama.host else []


BATCH_KEYS = frozenset(set(BatchConfig.model_fields) - set(Config.model_fields))
"""The keys a batch config has that a run config has not."""


def _model_at(root: type[BaseModel], path: tuple[Any, ...]) -> type[BaseModel] | None:
    """The model a validation error's location points into (list items included)."""
    model: type[BaseModel] | None = root
    items: type[BaseModel] | None = None
    for part in path:
        if isinstance(part, int):
            model, items = items, None
            continue
        if model is None or part not in model.model_fields:
            return None
        annotation = model.model_fields[part].annotation
        model = _as_model(annotation)
        args = get_args(annotation)
        items = _as_model(args[0]) if get_origin(annotation) is list and args else None
    return model


def _as_model(annotation: Any) -> type[BaseModel] | None:
    return (
        annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None
    )


def describe_error(root: type[BaseModel], error: Any) -> str:
    """One validation error of a `root` model as a config problem, with a did-you-mean hint."""
    loc = tuple(error["loc"])
    name = ".".join(str(p) for p in loc) or "(top level)"
    if error["type"] == "extra_forbidden":
        parent = _model_at(root, loc[:-1])
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
    plain = got is not None and not isinstance(got, dict | list)
    shown = f" (got {cut(hide_credentials(repr(got)))})" if plain else ""
    message = str(error["msg"]).removeprefix("Value error, ")
    return f"`{name}`: {message}{shown}"


def validated(model: type[M], data: Any, source: str) -> M:
    """`data` as a `model`; raises `ConfigError` naming every bad field and `source`."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the config must be a YAML mapping of keys to values")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(describe_error(model, e) for e in exc.errors())
        raise ConfigError(f"{source}: {problems}") from None


def parse_config(data: Any, source: str = "<config>") -> Config:
    """Validate a loaded run config; raises `ConfigError` naming every bad field and `source`."""
    return validated(Config, data, source)


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
