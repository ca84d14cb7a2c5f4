"""Interventions without code: applied once each across kill -9 and resume, and in forks.

One run has all three kinds: `write` fails in cycles 3-4, the operator speaks at cycle 5,
the memory is wiped at cycle 7 (and `write` fails again in cycle 6, after the fork point).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from support.backends import Backend
from support.cli import cli, cli_in_process
from support.runs import outcome, read_log, write_config
from support.stub import scripted_stub


def write(key: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "write", "arguments": {"key": key, "value": f"v-{key}"}}]}


SCRIPT = {c: [write(f"k{c}"), f"Reflection {c}."] for c in range(1, 9)}
INTERVENTIONS = [
    {"cycles": [3, 4], "tool_fails": {"tool": "write", "error": "disk full"}},
    {"at_cycle": 5, "operator_message": "Please keep a diary."},
    {"at_cycle": 7, "memory": {"clear": True}},
    {"cycles": [6], "tool_fails": {"tool": "write", "error": "quota exceeded"}},
]
KILLS = [
    ("run", "after-commit:c3:s0:t0"),  # a failed write recorded, its checkpoint not written
    ("resume", "after-commit:c5:intervention:1"),  # the operator message recorded, cycle unopened
    ("resume", "before-commit:c7:intervention:2"),  # inside the memory wipe's transaction
    ("resume", "after-commit:c7:intervention:2"),  # the wipe committed, its checkpoint not written
]


def interventions(backend: Backend, run_id: str) -> list[dict[str, Any]]:
    return [e for e in read_log(backend, run_id) if e["event_type"] == "INTERVENTION"]


def test_three_kinds_once_each_through_kills_and_in_a_fork_after_cycle_5(
    tmp_path: Path, sqlite_backend: Backend
) -> None:
    backend = sqlite_backend
    with scripted_stub(SCRIPT) as server:
        common: dict[str, Any] = {
            "cycles": 8,
            "ollama": {"host": server.url},
            "interventions": INTERVENTIONS,
        }
        reference = write_config(tmp_path / "ref.yaml", backend, run_id="ref", **common)
        done = cli_in_process(backend, "run", str(reference))
        assert done.returncode == 0, done.stderr
        crashed = write_config(tmp_path / "crash.yaml", backend, run_id="crash", **common)
        for command, point in KILLS:
            args = ["run", str(crashed)] if command == "run" else ["resume", "crash"]
            killed = cli(backend, *args, env={"CONTREACT_FAILPOINTS": point})
            assert killed.returncode == -9, f"{point} was not reached: {killed.stderr}"
        finished = cli_in_process(backend, "resume", "crash")
        assert finished.returncode == 0, finished.stderr
        forked = cli_in_process(backend, "fork", "ref", "--cycle", "5", "--as", "branch")
        assert forked.returncode == 0, forked.stderr
        requests = [r["body"] for r in server.requests()]
        # A fork after the wipe starts from the wiped memory, not from every write before it.
        late = cli_in_process(backend, "fork", "ref", "--cycle", "7", "--as", "late")
        assert late.returncode == 0, late.stderr
        plain = cli_in_process(
            backend, "fork", "ref", "--cycle", "5", "--as", "plain", "--no-interventions"
        )
        assert plain.returncode == 0, plain.stderr

    expected = outcome(backend, "ref")
    assert outcome(backend, "crash") == expected, "the crashed run differs from the reference"

    applied = interventions(backend, "ref")
    assert [(e["cycle_number"], e["payload"]["kind"]) for e in applied] == [
        (3, "tool_fails"),
        (4, "tool_fails"),
        (5, "operator_message"),
        (6, "tool_fails"),
        (7, "memory"),
    ]
    # k1, k2 and k5 were stored (the writes of cycles 3, 4 and 6 failed) when cycle 7 opened.
    assert applied[-1]["payload"]["detail"] == {"clear": True, "deleted": 3}
    # The model saw each one: the failed write's error, the operator's words, the empty memory.
    calls = [e for e in read_log(backend, "ref") if e["event_type"] == "TOOL_CALL"]
    assert [c["payload"]["output"] for c in calls if c["cycle_number"] in (3, 4)] == [
        "Error: disk full"
    ] * 2
    opening5 = [
        m["content"]
        for body in requests
        for m in body["messages"]
        if m["role"] == "user" and m["content"].startswith("Cycle 5 begins.")
    ]
    assert opening5 and opening5[0].endswith("A message from the operator: Please keep a diary.")
    _, memory, _ = expected
    assert sorted(memory) == ["k7", "k8"]  # wiped as cycle 7 opened

    assert outcome(backend, "late")[1] == memory
    # The fork inherits cycles 1-5 as they were (those interventions are not applied again:
    # their events are the parent's, timestamps and all) and applies those after cycle 5.
    branch = interventions(backend, "branch")
    inherited = [e for e in branch if e["cycle_number"] <= 5]
    assert inherited == [{**e, "run_id": "branch"} for e in applied if e["cycle_number"] <= 5]
    after = [e for e in branch if e["cycle_number"] > 5]
    assert [(e["cycle_number"], e["payload"]) for e in after] == [
        (e["cycle_number"], e["payload"]) for e in applied if e["cycle_number"] > 5
    ]
    assert all(e["timestamp"] not in {a["timestamp"] for a in applied} for e in after)
    # Told otherwise, a fork applies none: only the inherited events of cycles 1-5 are there.
    assert [e["cycle_number"] for e in interventions(backend, "plain")] == [3, 4, 5]
