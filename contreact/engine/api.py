"""`contreact.run(config, tools=[...], hooks=[...])`: a run from a notebook or a script.

Tools and hooks are handed over as Python objects instead of import paths, with the same
guarantees as configured ones (journaled calls, hooks inside the journaled step, their
identity in the run's EXTENSIONS event). Running the same cell again after a crash or an
interrupt continues the run: a run id that exists and is not completed is resumed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from contreact.checkpoints.engines import engine_for
from contreact.checkpoints.registry import RunNotFoundError, get_run
from contreact.checkpoints.storage import Storage, resolve_storage
from contreact.config import Config, parse_config
from contreact.config.files import load_config
from contreact.engine.outcome import Progress, RunOutcome
from contreact.engine.runner import resume_run, start_run


def run(
    config: Config | Mapping[str, Any] | str | Path,
    *,
    tools: Iterable[Any] = (),
    hooks: Iterable[Any] = (),
    storage: Storage | None = None,
    progress: Progress | None = None,
) -> RunOutcome:
    """Start the run `config` describes (or continue it, if it exists and is not completed).

    Args:
        config: A `Config`, a mapping of a config's keys, or a YAML config's path.
        tools: Functions to offer as tools, beside the config's (`@contreact.tool` marks
            an effectful one; a parameter `idempotency_key` receives the call's key).
        hooks: Objects with any of the hook methods (`on_run_start`, `before_tool_call`, ...).
        storage: Where the run lives (default: the config's `storage`, else ./runs).
        progress: What to show while it moves (default: nothing).

    Returns:
        How the drive ended (`status`, `reason`, `cycle`).
    """
    if isinstance(config, str | Path):
        config = load_config(config)
    elif not isinstance(config, Config):
        config = parse_config(dict(config), "contreact.run")
    where = storage or resolve_storage(config.storage.data_dir, config.storage.url)
    handed = {"tools": list(tools), "hooks": list(hooks)}
    try:
        record = get_run(engine_for(where), config.run_id)
    except RunNotFoundError:
        return start_run(config, where, progress=progress, handed=handed)
    if record.status == "completed":
        return RunOutcome(record.run_id, "completed", record.reason, int(record.config["cycles"]))
    return resume_run(config.run_id, where, progress=progress, handed=handed)
