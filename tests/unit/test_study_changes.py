"""What running a batch again may change: cycles up, replicates up, hosts; nothing else.

`studies.changes.differences` compares a batch config's plan with the stored runs of its
batch; the end-to-end behaviour (refused with exit 2, extended through the queue) is in
tests/e2e/test_batch_changes.py. The cycle column of a batch's status tells a running run
from a finished one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from contreact.checkpoints.run_record import RunRecord
from contreact.studies.batch import load_batch, short_of
from contreact.studies.changes import differences
from contreact.studies.status import RunView


def plan(tmp_path: Path, name: str = "b.yaml", **fields: Any) -> Any:
    config = {
        "batch": "b",
        "models": ["m1", "m2"],
        "replicates": 1,
        "cycles": 2,
        "ollama": {"hosts": ["http://gpu1:11434"]},
        **fields,
    }
    path = tmp_path / name
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return load_batch(path)


def stored(spec: Any) -> list[RunRecord]:
    """The runs as the batch stored them (started on their hosts, pinned)."""
    return [
        RunRecord(
            p.run_id, "t", "completed", p.model, "h", p.config, "", None, None, "b", None, "", ""
        )
        for p in spec.runs
    ]


def test_the_same_config_again_is_no_difference(tmp_path: Path) -> None:
    runs = stored(plan(tmp_path))
    assert differences(plan(tmp_path), runs) == []


def test_more_cycles_more_replicates_and_other_hosts_are_no_difference(tmp_path: Path) -> None:
    runs = stored(plan(tmp_path))
    grown = plan(
        tmp_path,
        "other-folder.yaml",
        cycles=5,
        replicates=2,
        ollama={"hosts": ["http://gpu3:11434"], "parallel": {"http://gpu3:11434": 2}},
    )
    assert differences(grown, runs) == []
    assert all(short_of(r, 5) for r in runs) and not any(short_of(r, 2) for r in runs)


def test_a_setting_newer_than_the_stored_runs_is_no_difference_at_its_default(
    tmp_path: Path,
) -> None:
    runs = stored(plan(tmp_path))
    for run in runs:  # as a release before `tools.timeout_s` stored them
        del run.config["tools"]["timeout_s"]
    assert differences(plan(tmp_path), runs) == []
    assert differences(plan(tmp_path, tools={"timeout_s": 60}), runs) == [
        "`tools.timeout_s`: not set in its 2 runs, 60.0 in the config"
    ]


def test_every_other_difference_is_named_once_with_how_many_runs_have_it(tmp_path: Path) -> None:
    runs = stored(plan(tmp_path))
    changed = plan(
        tmp_path,
        models=["m1"],
        cycles=1,
        model_options={"temperature": 0.9},
        user_turn="Go on.",
    )
    assert differences(changed, runs) == [
        "the batch has runs the config does not plan (b.m2.r1): a model or replicates were "
        "taken away",
        "`cycles`: 2 in its run, 1 in the config (a run is never shortened)",
        "`model_options.temperature`: 0.6 in its run, 0.9 in the config",
        '`user_turn`: "Cycle {cycle} begins." in its run, "Go on." in the config',
    ]
    both = plan(tmp_path, model_options={"temperature": 0.9})
    assert differences(both, runs) == [
        "`model_options.temperature`: 0.6 in its 2 runs, 0.9 in the config"
    ]


def test_the_cycle_column_tells_a_running_run_from_a_finished_one() -> None:
    view = RunView("r", "m", 4, cycle=3, done=2, status="running")
    assert view.cycle_shown == "in 3/4"
    between = RunView("r", "m", 4, cycle=2, done=2, status="running")
    assert between.cycle_shown == "in 3/4"
    assert RunView("r", "m", 4, cycle=4, done=4, status="completed").cycle_shown == "4/4 ✓"
    assert RunView("r", "m", 4, cycle=3, done=2, status="failed").cycle_shown == "2/4"
    assert RunView("r", "m", 4).cycle_shown == "0/4"
