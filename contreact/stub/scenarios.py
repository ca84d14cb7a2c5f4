"""Scenarios: which agent answers, which models are listed, which faults are queued.

A scenario is a small YAML file (or mapping) that configures a whole stub server, so a
test, the demo or a benchmark can say "this model, these faults, this script" in one
place. The bundled ones live in ``contreact/stub/scripts/``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from contreact.stub.agents import Agent, LooperAgent, ScriptedAgent, SimulatedAgent
from contreact.stub.ollama_api import DEFAULT_EMBEDDING_MODELS, DEFAULT_MODELS

__all__ = ["SCRIPTS_DIR", "Scenario", "load_scenario", "resolve_scenario_path"]

SCRIPTS_DIR = Path(__file__).resolve().parent / "scripts"

_SCENARIO_KEYS = frozenset(
    {
        "agent",
        "models",
        "embedding_models",
        "latency_ms",
        "seed",
        "script",
        "default",
        "faults",
        "description",
    }
)


@dataclass
class Scenario:
    """A loaded scenario: which agent answers, which models exist, what goes wrong.

    Attributes:
        agent: The response generator.
        models: Chat model names the server lists.
        embedding_models: Embedding model names the server lists.
        latency_ms: Delay added to every chat request.
        faults: Faults queued when the server starts (see ``contreact.stub.faults``).
        description: Free text from the file, for humans.
        source: The file the scenario came from, if any.
    """

    agent: Agent
    models: tuple[str, ...] = DEFAULT_MODELS
    embedding_models: tuple[str, ...] = DEFAULT_EMBEDDING_MODELS
    latency_ms: float = 0.0
    faults: tuple[dict[str, Any], ...] = ()
    description: str = ""
    source: str | None = None


def resolve_scenario_path(name: str | Path) -> Path:
    """Find a scenario file: an existing path, else a bundled script by name.

    ``demo`` and ``demo.yaml`` both resolve to ``contreact/stub/scripts/demo.yaml``
    unless a file of that name exists in the working directory.

    Args:
        name: A path or the stem/name of a bundled scenario.

    Returns:
        The path of an existing file.

    Raises:
        FileNotFoundError: If neither exists; the message lists the bundled scenarios.
    """
    path = Path(name)
    if path.is_file():
        return path
    for candidate in (SCRIPTS_DIR / path.name, SCRIPTS_DIR / f"{path.name}.yaml"):
        if candidate.is_file():
            return candidate
    bundled = sorted(p.stem for p in SCRIPTS_DIR.glob("*.yaml"))
    raise FileNotFoundError(f"scenario {str(name)!r} not found (bundled: {', '.join(bundled)})")


def _names(value: Any, key: str, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [v for v in value.split(",") if v.strip()]
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ValueError(f"{where}: '{key}' must be a list of model names")
    return tuple(v.strip() for v in value)


def load_scenario(source: str | Path | Mapping[str, Any]) -> Scenario:
    """Load a scenario from a YAML file, a bundled scenario name, or a mapping.

    Format (all keys optional)::

        agent: simulated        # scripted | simulated | looper
        models: [stub-model]
        embedding_models: [stub-embed]
        latency_ms: 0
        seed: 0                 # simulated only
        script: {1: [...], 2: [...]}   # scripted only
        default: {content: ...}        # scripted only
        faults: [{kind: http, status: 503}]
        description: free text

    Args:
        source: A path, a bundled name (``"demo"``), or an already-parsed mapping.

    Returns:
        The scenario.

    Raises:
        ValueError: On unknown keys or malformed values; the message names the field
            and the file.
        FileNotFoundError: If a path does not exist.
    """
    where = "scenario"
    origin: str | None = None
    if isinstance(source, Mapping):
        data: Any = dict(source)
    else:
        path = resolve_scenario_path(source)
        origin = str(path)
        where = origin
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    if not isinstance(data, dict):
        raise ValueError(f"{where}: a scenario must be a mapping")
    unknown = set(data) - _SCENARIO_KEYS
    if unknown:
        raise ValueError(
            f"{where}: unknown key(s) {sorted(unknown)}; allowed: {sorted(_SCENARIO_KEYS)}"
        )
    kind = str(data.get("agent", "simulated"))
    seed = data.get("seed", 0)
    if not isinstance(seed, int):
        raise ValueError(f"{where}: 'seed' must be an integer")
    agent: Agent
    try:
        if kind == "scripted":
            script = data.get("script") or {}
            if not isinstance(script, Mapping):
                raise ValueError("'script' must be a mapping of cycle -> list of entries")
            agent = ScriptedAgent(script, data.get("default"))
        elif kind == "simulated":
            agent = SimulatedAgent(seed=seed)
        elif kind == "looper":
            agent = LooperAgent()
        else:
            raise ValueError(f"'agent' must be scripted, simulated or looper, not {kind!r}")
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None
    latency = data.get("latency_ms", 0)
    if not isinstance(latency, int | float) or latency < 0:
        raise ValueError(f"{where}: 'latency_ms' must be a non-negative number")
    faults = data.get("faults") or []
    if not isinstance(faults, list) or not all(isinstance(f, dict) for f in faults):
        raise ValueError(f"{where}: 'faults' must be a list of mappings")
    return Scenario(
        agent=agent,
        models=_names(data.get("models", list(DEFAULT_MODELS)), "models", where),
        embedding_models=_names(
            data.get("embedding_models", list(DEFAULT_EMBEDDING_MODELS)), "embedding_models", where
        ),
        latency_ms=float(latency),
        faults=tuple(faults),
        description=str(data.get("description") or ""),
        source=origin,
    )
