"""A batch is one thing you can change: more cycles extend it, more replicates add runs.

Running a batch again after its config changed either does what the config now says or
refuses. Raising `cycles` extends every run (on one machine, and through the queue on
PostgreSQL, where the workers extend the runs they take); each extended run is the run
that would have been made with those cycles from the start. A replicate added is a new
run. Any other difference between the config and the stored runs is refused (exit 2),
every difference named, before anything runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from contreact.stub import StubServer
from contreact.studies.batch import load_batch
from support.backends import Backend
from support.cli import cli_in_process
from support.runs import PER_DRIVE, event_summary
from support.workers import Machine

MODELS = ["llama3.1:8b", "qwen3:8b"]


def study(path: Path, hosts: list[str], storage: dict[str, Any], **fields: Any) -> Path:
    config = {
        "batch": "grows",
        "models": MODELS,
        "replicates": 2,
        "cycles": 2,
        "parallel": 2,
        "operator": {"mode": "auto", "no_reply": True},
        "ollama": {"hosts": hosts},
        "storage": storage,
        **fields,
    }
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


def change(path: Path, **fields: Any) -> None:
    config = yaml.safe_load(path.read_text(encoding="utf-8"))
    path.write_text(yaml.safe_dump({**config, **fields}), encoding="utf-8")


def left_behind(storage: Any, run_id: str) -> dict[str, Any]:
    """What a run left in its database: reflections, memory, and its events.

    Every event but the drive's own (PROVENANCE, HOST_CHANGE) and the run's frame
    (RUN_START names the cycles planned when it began, RUN_END where each drive ended),
    which `frame` returns.
    """
    from contreact.checkpoints.cycles import cycle_records
    from contreact.checkpoints.engines import engine_for
    from contreact.checkpoints.event_store import read_events
    from contreact.tools.memory import memory_snapshot

    engine = engine_for(storage)
    events = event_summary(read_events(engine, run_id))
    frame = {"RUN_START", "RUN_END", "HOST_CHANGE", *PER_DRIVE}
    return {
        "reflections": [(r.cycle, r.reflection, r.flags) for r in cycle_records(engine, run_id)],
        "memory": memory_snapshot(engine, run_id),
        "events": [e for e in events if e[1] not in frame],
        "model_calls": [e for e in events if e[1] == "LLM_INVOCATION"],
    }


def frame(storage: Any, run_id: str) -> list[tuple[int, str, Any]]:
    from contreact.checkpoints.engines import engine_for
    from contreact.checkpoints.event_store import read_events

    events = event_summary(read_events(engine_for(storage), run_id))
    return [
        (cycle, kind, payload.get("last_cycle", payload.get("cycles")))
        for cycle, kind, payload in events
        if kind in ("RUN_START", "RUN_END")
    ]


def statuses(backend: Backend, name: str) -> dict[str, tuple[str, int]]:
    shown = cli_in_process(backend, "batch", "--status", name, "--json")
    assert shown.returncode == 0, shown.stderr
    return {r["run_id"]: (r["status"], r["cycles_done"]) for r in json.loads(shown.stdout)}


@pytest.mark.postgres
def test_raising_cycles_extends_every_run_through_the_queue_as_if_planned_so(
    tmp_path: Path, postgres_backend: Backend
) -> None:
    url = str(postgres_backend.db_url)
    storage = postgres_backend.storage()
    with StubServer(models=MODELS).start() as a, StubServer(models=MODELS).start() as b:
        config = study(tmp_path / "study.yaml", [a.url, b.url], {"url": url})
        first = cli_in_process(postgres_backend, "batch", str(config), timeout=600)
        assert first.returncode == 0, first.stdout + first.stderr
        runs = [r.run_id for r in load_batch(config).runs]
        assert statuses(postgres_backend, "grows") == {r: ("completed", 2) for r in runs}

        change(config, cycles=3)
        queued = cli_in_process(postgres_backend, "batch", str(config), "--no-work")
        assert queued.returncode == 0, queued.stderr
        assert "4 queued, 0 already queued or running, 0 completed" in queued.stdout
        machines = [Machine(tmp_path, f"m{i}", url, "--parallel", "2") for i in (1, 2)]
        for machine in machines:
            assert machine.wait(timeout=300) == 0, machine.output()
        said = "".join(m.output() for m in machines)
        assert statuses(postgres_backend, "grows") == {r: ("completed", 3) for r in runs}
        assert all(f"{r}: completed (3 cycles)" in said for r in runs), said

        # Run again as it is: nothing more to do, and the workers' jobs are not repeated.
        again = cli_in_process(postgres_backend, "batch", str(config), "--no-work")
        assert "0 queued, 0 already queued or running, 4 completed" in again.stdout

    # The same study planned with 3 cycles from the start, on one machine (no queue).
    local = Backend("sqlite", tmp_path / "reference")
    with StubServer(models=MODELS).start() as a, StubServer(models=MODELS).start() as b:
        alone = study(tmp_path / "alone.yaml", [a.url, b.url], {"data_dir": str(local.data_dir)})
        change(alone, cycles=3)
        done = cli_in_process(local, "batch", str(alone), timeout=600)
        assert done.returncode == 0, done.stdout + done.stderr
    for run_id in runs:
        extended, planned = left_behind(storage, run_id), left_behind(local.storage(), run_id)
        assert len(extended["reflections"]) == 3 and len(extended["model_calls"]) >= 3
        assert extended == planned, run_id
        # What tells them apart is the record of how each came to be: the extended run
        # began planned for 2 cycles and ended a first time after the second.
        assert frame(storage, run_id) == [(1, "RUN_START", 2), (2, "RUN_END", 2), (3, "RUN_END", 3)]
        assert frame(local.storage(), run_id) == [(1, "RUN_START", 3), (3, "RUN_END", 3)]


def test_raising_cycles_and_adding_a_replicate_on_one_machine(
    tmp_path: Path, sqlite_backend: Backend
) -> None:
    with StubServer(models=MODELS).start() as a:
        config = study(
            tmp_path / "study.yaml",
            [a.url],
            {"data_dir": str(sqlite_backend.data_dir)},
            models=MODELS[:1],
            replicates=1,
            cycles=1,
        )
        assert cli_in_process(sqlite_backend, "batch", str(config)).returncode == 0
        change(config, cycles=2, replicates=2)
        grown = cli_in_process(sqlite_backend, "batch", str(config))
        assert grown.returncode == 0, grown.stdout + grown.stderr
    first, added = (r.run_id for r in load_batch(config).runs)
    assert f"{first}: extended to 2 cycles" in grown.stdout
    assert f"{added}: started" in grown.stdout
    assert statuses(sqlite_backend, "grows") == {first: ("completed", 2), added: ("completed", 2)}


def test_any_other_change_is_refused_naming_every_difference(
    tmp_path: Path, sqlite_backend: Backend
) -> None:
    with StubServer(models=MODELS).start() as a:
        config = study(
            tmp_path / "study.yaml",
            [a.url],
            {"data_dir": str(sqlite_backend.data_dir)},
            replicates=1,
            cycles=2,
        )
        assert cli_in_process(sqlite_backend, "batch", str(config)).returncode == 0
        requests = len(a.requests())
        change(
            config,
            models=MODELS[:1],
            cycles=1,
            model_options={"temperature": 0.9},
            tools={"disable": ["delete"]},
        )
        refused = cli_in_process(sqlite_backend, "batch", str(config))
        assert len(a.requests()) == requests  # nothing ran
    assert refused.returncode == 2
    line = refused.stderr
    assert line.startswith(f"contreact: batch grows has runs that {config} no longer describes: ")
    assert line.count("\n") == 1
    for difference in (
        "the batch has runs the config does not plan (grows.qwen3-8b.r1)",
        "`cycles`: 2 in its run, 1 in the config (a run is never shortened)",
        "`model_options.temperature`: 0.6 in its run, 0.9 in the config",
        '`tools.disable`: [] in its run, ["delete"] in the config',
        "give the config a new `batch:` name",
    ):
        assert difference in line, line
    # The hosts a study runs on are not the study: another host is no difference.
    with StubServer(models=MODELS).start() as other:
        config = study(
            tmp_path / "moved.yaml",
            [other.url],
            {"data_dir": str(sqlite_backend.data_dir)},
            replicates=1,
            cycles=2,
        )
        moved = cli_in_process(sqlite_backend, "batch", str(config))
    assert moved.returncode == 0, moved.stderr
    assert "grows.llama3.1-8b.r1: completed (2 cycles)" in moved.stdout
