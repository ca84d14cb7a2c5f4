"""What a batch config changes in a batch that has runs already: what may change, and what not.

A batch is one study, run again and again from its config: running it again must either
do what the config now says or refuse. Two changes keep the study one study, and are
done: more `cycles` (every run is extended, which leaves each run as if it had been
planned with them from the start) and more `replicates` (new runs). Anything else (a
model, an option, a tool, a prompt, fewer cycles or runs) would make the stored runs and
the config two different studies under one name; it is refused, with every difference
listed, and a new batch name is the way to make it.

Where a run is placed is not part of the study: its Ollama host (runs move between the
batch's hosts), the hosts' slots, the storage it is found in and the folders its tools are
imported from may change freely.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from sqlalchemy import Engine, inspect, select

from contreact.checkpoints.run_record import RunRecord, record_from_row
from contreact.checkpoints.schema import runs
from contreact.config import parse_config
from contreact.studies.batch import BatchSpec
from contreact.text.messages import cut

PLACEMENT = ("ollama.host", "ollama.hosts", "ollama.parallel", "storage", "import_dirs")
"""Config paths (and everything under them) that say where a run goes, not what it is."""

IDENTITY = ("run_id", "batch", "cycles")
"""Compared apart: the run's name and batch are its place in the plan; cycles may grow."""


@dataclass(frozen=True)
class Difference:
    """One setting that differs between a batch config and a stored run of it."""

    path: str
    stored: str
    """The stored runs' value, as shown."""
    planned: str
    """The config's value, as shown."""

    def line(self, runs: int) -> str:
        """`model_options.temperature`: 0.6 in its 6 runs, 0.7 in the config."""
        where = "its run" if runs == 1 else f"its {runs} runs"
        return f"`{self.path}`: {self.stored} in {where}, {self.planned} in the config"


_ABSENT = object()


def _shown(value: Any) -> str:
    if value is _ABSENT:
        return "not set"
    return cut(json.dumps(value, sort_keys=True, ensure_ascii=False, default=str), 80)


def stored_runs(engine: Engine, batch: str) -> list[RunRecord]:
    """The runs stored under batch name `batch` (none in a database without contreact's tables)."""
    if not inspect(engine).has_table(runs.name):
        return []
    with engine.connect() as conn:
        rows = conn.execute(select(runs).where(runs.c.batch == batch)).mappings()
        return [record_from_row(dict(r)) for r in rows]


def differences(spec: BatchSpec, stored: list[RunRecord]) -> list[str]:
    """What keeps `spec` from being run over the `stored` runs of its batch, one line each.

    Empty when the config asks only for what the batch may become: more cycles, more
    replicates, other hosts.
    """
    planned = {p.run_id: p for p in spec.runs}
    lines: list[str] = []
    gone = sorted(r.run_id for r in stored if r.run_id not in planned)
    if gone:
        lines.append(
            f"the batch has runs the config does not plan ({', '.join(cut(g, 80) for g in gone)}): "
            "a model or replicates were taken away"
        )
    counted: dict[Difference, int] = {}
    shorter: list[str] = []
    for record in stored:
        plan = planned.get(record.run_id)
        if plan is None:
            continue
        if plan.cycles < int(record.config.get("cycles", 0)):
            shorter.append(record.run_id)
        for difference in _compare(record.config, plan.config):
            counted[difference] = counted.get(difference, 0) + 1
    if shorter:
        most = max(int(r.config.get("cycles", 0)) for r in stored if r.run_id in shorter)
        where = "its run" if len(shorter) == 1 else f"its {len(shorter)} runs"
        lines.append(
            f"`cycles`: {most} in {where}, {spec.runs[0].cycles} in the config (a run is "
            "never shortened)"
        )
    lines += [d.line(n) for d, n in counted.items()]
    return lines


def _compare(stored: Mapping[str, Any], planned: Mapping[str, Any]) -> list[Difference]:
    flat_stored, flat_planned = _flatten(stored), _flatten(planned)
    found = []
    for path in sorted(set(flat_stored) | set(flat_planned)):
        if path in IDENTITY or any(path == p or path.startswith(p + ".") for p in PLACEMENT):
            continue
        old, new = flat_stored.get(path, _ABSENT), flat_planned.get(path, _ABSENT)
        if old is _ABSENT and new == _defaults().get(path, _ABSENT):
            # A setting newer than the stored run, at its default: the run goes on with it
            # anyway (its config is read with today's defaults when it resumes).
            continue
        if old != new:
            found.append(Difference(path, _shown(old), _shown(new)))
    return found


@cache
def _defaults() -> dict[str, Any]:
    """Every setting of a run config at its default, as `a.b.c` paths."""
    return _flatten(parse_config({"run_id": "r", "model": "m"}).model_dump(mode="json"))


def _flatten(value: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested mappings as `a.b.c` paths; lists and scalars are leaves."""
    flat: dict[str, Any] = {}
    for key, item in value.items():
        path = f"{prefix}{key}"
        if isinstance(item, Mapping) and item:
            flat.update(_flatten(item, path + "."))
        else:
            flat[path] = item
    return flat
