"""A run's config for a test, and what a run left behind (database rows, JSONL log)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from support.backends import Backend


def write_config(path: Path, backend: Backend, **fields: Any) -> Path:
    """Write a run config YAML for `backend`; `fields` override the defaults."""
    config: dict[str, Any] = {
        "run_id": "run-1",
        "model": "stub-model",
        "cycles": 3,
        "ollama": {"timeout_s": 20, "retries": 3, "retry_budget_s": 20},
        "storage": backend.storage_yaml(),
    }
    for key, value in fields.items():
        if isinstance(value, dict) and isinstance(config.get(key), dict):
            config[key] = {**config[key], **value}
        else:
            config[key] = value
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


def read_log(backend: Backend, run_id: str) -> list[dict[str, Any]]:
    """The run's JSONL event log."""
    path = backend.data_dir / "logs" / f"{run_id}.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


VOLATILE = {
    "timestamp",
    "duration_s",
    "seconds",
    "model_seconds",
    "wait_s",
    "host",
    "process_alive",
    "provenance",
}
"""Payload fields that differ between two runs of one script: times, and the provenance
record (its time, and the host's answers at that moment)."""

PER_DRIVE = {"PROVENANCE"}
"""Events made once per drive of a run (a resume adds one), not by the run's script."""


def stable(value: Any) -> Any:
    """A value with wall-clock fields removed, for comparing two runs of one script."""
    if isinstance(value, dict):
        return {k: stable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [stable(v) for v in value]
    return value


def outcome(backend: Backend, run_id: str) -> tuple[list[Any], dict[str, str], list[Any]]:
    """What a run left behind, read from its database and its JSONL log.

    (reflection, flags) per cycle, the memory, and the stable event summary. Read in
    process: the CLI's own `show` and `memory` output is tested where it is the subject.
    """
    from contreact.checkpoints.cycles import cycle_records
    from contreact.checkpoints.engines import engine_for
    from contreact.tools.memory import memory_snapshot

    engine = engine_for(backend.storage())
    cycles = [(r.cycle, r.reflection, r.flags) for r in cycle_records(engine, run_id)]
    return cycles, memory_snapshot(engine, run_id), event_summary(read_log(backend, run_id))


def event_summary(events: Sequence[dict[str, Any]]) -> list[tuple[int, str, Any]]:
    """(cycle, type, stable payload) of every event, in order."""
    return [
        (e["cycle_number"], e["event_type"], stable(e["payload"]))
        for e in events
        if e["event_type"] not in PER_DRIVE
    ]
