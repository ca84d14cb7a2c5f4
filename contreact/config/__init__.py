"""The run configuration: the one pydantic model of a run's settings, and its validation.

Every default of a run is declared in this package, once, on the pydantic sections
(`config.sections`, `config.extensions`): the YAML config (read by `config.files`),
the graph's runtime context (`graph.state.Context` is a `Settings`), a run started in
Studio and a batch all read them from these models.

A researcher's config is the record of an experiment, so it is strict: unknown keys are
errors with a "did you mean" hint, wrong types name the field and the file, and every
problem in the file is reported at once, not one per attempt.
"""

from __future__ import annotations

import difflib
from typing import Any, Literal, TypeVar, get_args, get_origin

from pydantic import (
    BaseModel,
    Field,
    ValidationError,
    field_validator,
)

from contreact.checkpoints.run_record import check_run_id
from contreact.config.extensions import Intervention, ToolSettings, import_paths
from contreact.config.sections import (
    DEFAULT_MODEL_OPTIONS,
    Limits,
    OllamaSettings,
    OperatorSettings,
    PeiSettings,
    PersistenceSettings,
    ReflectionSettings,
    SimilaritySettings,
    StorageSettings,
    Strict,
)
from contreact.ollama.credentials import hide_credentials
from contreact.ollama.hosts import default_ollama_host
from contreact.ollama.options import check_model_options
from contreact.text.messages import cut

M = TypeVar("M", bound=BaseModel)


class ConfigError(Exception):
    """A config that cannot be used; the message names every bad field and the file."""


class Settings(Strict):
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
    """Objects called at points of the run, as `package.module:object` (`extensions.hooks`)."""
    import_dirs: list[str] = Field(default_factory=list)
    """Folders searched for the modules `tools.add` and `hooks` name, after the installed
    packages (so a module there never shadows an installed one). Reading a config file
    adds the file's own folder; relative folders are taken from the file's folder."""
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
        return import_paths(value)

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


class ModelEntry(Strict):
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
