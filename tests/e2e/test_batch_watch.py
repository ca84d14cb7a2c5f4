"""Watching from the terminal: a batch followed live, and what happens to a run as it happens.

`batch --status NAME --watch` redraws its table in place on a terminal (like `top`) and is
plain lines in a pipe; either way it ends when every run is settled, with the batch's exit
code. The cycle column tells a running run (`in 2/3`) from a finished one (`3/3 ✓`).
Interventions and the hooks' vetoes and rewrites are lines of a run's live output, in
`contreact run` and in a batch's progress, as they happen.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import yaml

from contreact.stub import StubServer
from support.backends import Backend
from support.cli import Terminal, cli, cli_in_process, cli_start
from support.runs import write_config
from support.stub import scripted_stub
from support.workers import wait_for

RUNS = ["watched.stub-model.r1", "watched.stub-model.r2"]


def start_batch(tmp_path: Path, backend: Backend, url: str) -> subprocess.Popen[str]:
    """A 2-run batch of 3 cycles started in the background, once its plan is stored."""
    config = tmp_path / "batch.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "batch": "watched",
                "models": ["stub-model"],
                "replicates": 2,
                "parallel": 2,
                "cycles": 3,
                "ollama": {"host": url},
            }
        ),
        encoding="utf-8",
    )
    started = cli_start(backend, "batch", str(config))

    def planned() -> bool:
        if started.poll() is not None:
            raise AssertionError(started.communicate())
        return cli_in_process(backend, "batch", "--status", "watched").returncode == 0

    wait_for(planned, 120, "the batch's plan")
    return started


def test_watch_on_a_terminal_redraws_the_table_in_place(
    tmp_path: Path, sqlite_backend: Backend
) -> None:
    with StubServer(latency_ms=150).start() as server:
        started = start_batch(tmp_path, sqlite_backend, server.url)
        term = Terminal(sqlite_backend, "batch", "--status", "watched", "--watch")
        term.expect(r"batch watched · \d\d:\d\d:\d\d")
        # A running run's cycle is the one under way; a finished run's is ticked.
        term.expect(
            r"│ watched\.stub-model\.r\d\s+│ stub-model\s+│ in [123]/3\s+│ \d*\s+│ running", 120
        )
        term.expect(r"cycle \d/3 done in", 120)
        # The last frame: both runs done (the watch then ends by itself).
        term.expect(r"r1\s+│ stub-model\s+│ 3/3 ✓[^\n]*\n[^\n]*r2\s+│ stub-model\s+│ 3/3 ✓", 120)
        assert term.close(timeout=60) == 0
        assert started.wait(timeout=120) == 0, started.communicate()
    screen = term.transcript
    for run in RUNS:
        assert re.search(rf"│ {re.escape(run)}\s+│ stub-model\s+│ 3/3 ✓\s+│\s+│ completed", screen)
    # In place: one table on the screen, redrawn (a cursor moved up over it), not reprinted.
    assert term.raw.count("\x1b[1A") + term.raw.count("\x1b[2K") > 10
    assert screen.count("Ctrl-C stops watching") >= 2


def test_watch_in_a_pipe_is_plain_lines_and_ends_with_the_batch(
    tmp_path: Path, sqlite_backend: Backend
) -> None:
    with StubServer(latency_ms=150).start() as server:
        started = start_batch(tmp_path, sqlite_backend, server.url)
        watched = cli(sqlite_backend, "batch", "--status", "watched", "--watch", timeout=300)
        assert started.wait(timeout=120) == 0, started.communicate()
    assert watched.returncode == 0, watched.stderr
    text = watched.stdout
    assert "\x1b[" not in text
    header = "run\tmodel\tcycle\tstep\tstatus\ttok/s\tETA\thost\tdriver\tworker"
    assert text.count(header) == 2  # the table when it starts and when every run is settled
    for run in RUNS:
        assert f"  {run}: cycle 3/3 done in " in text
        assert f"  {run}: running → completed" in text
        assert re.search(rf"^{re.escape(run)}\tstub-model\t3/3 ✓\t\tcompleted\t", text, re.M)


def test_watch_needs_status_and_is_not_json(sqlite_backend: Backend) -> None:
    alone = cli_in_process(sqlite_backend, "batch", "--watch")
    assert alone.returncode == 2 and "--watch goes with --status NAME" in alone.stderr
    both = cli_in_process(sqlite_backend, "batch", "--status", "x", "--watch", "--json")
    assert both.returncode == 2 and "--json prints it once" in both.stderr


GUARD = """
from contreact import Rewrite, Veto


class Guard:
    def before_tool_call(self, call):
        if call["name"] == "delete":
            return Veto("nothing is deleted in cycle 1")
        if call["name"] == "write" and call["args"].get("key") == "draft":
            return Rewrite({**call["args"], "key": "final"})
        return None


guard = Guard()
"""


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


SCRIPT = {
    1: [
        call("write", key="draft", value="a plan"),
        call("delete", key="final"),
        call("read", key="final"),
        "Reflection 1.",
    ],
    2: [call("write", key="diary", value="day 2"), "Reflection 2."],
}

NOTED = {
    "hooks": ["watch_guard:guard"],
    "tools": {"entry_points": False},
    "interventions": [
        {"at_cycle": 2, "operator_message": "Keep a diary."},
        {"at_cycle": 2, "memory": {"clear": True}},
        {"cycles": [2], "tool_fails": {"tool": "write", "error": "disk full"}},
    ],
}

LINES = [
    "cycle 1 · step 1 · hook watch_guard:guard rewrote write's arguments: "
    '{"key": "draft", "value": "a plan"} → {"key": "final", "value": "a plan"}',
    "cycle 1 · step 2 · hook watch_guard:guard vetoed delete: nothing is deleted in cycle 1",
    "cycle 2 · intervention 1: operator message: Keep a diary.",
    "cycle 2 · intervention 2: memory wiped (1 keys deleted)",
    "cycle 2 · step 1 · intervention 3: write made to fail: disk full",
]


def test_interventions_and_hook_answers_are_lines_of_a_runs_live_output(
    tmp_path: Path, sqlite_backend: Backend
) -> None:
    # The hook's module sits beside the config: importable without PYTHONPATH.
    (tmp_path / "watch_guard.py").write_text(GUARD, encoding="utf-8")
    with scripted_stub(SCRIPT) as server:
        config = write_config(
            tmp_path / "c.yaml",
            sqlite_backend,
            run_id="noted",
            cycles=2,
            ollama={"host": server.url},
            **NOTED,
        )
        done = cli(sqlite_backend, "run", str(config))
        # The stored run remembers the config's folder: `resume` imports the hook from any
        # folder it is started in (here the repository, with the config's folder on no path).
        resumed = cli(sqlite_backend, "resume", "noted", "--cycles", "1")
    assert resumed.returncode == 0, resumed.stderr
    assert done.returncode == 0, done.stderr
    shown = [line.strip() for line in done.stdout.splitlines()]
    assert [line for line in shown if line in LINES] == LINES, done.stdout
    # In order: a hook's answer before the result the model is given.
    assert shown.index(LINES[1]) < next(i for i, s in enumerate(shown) if s.startswith("delete ✗"))


def test_a_batch_shows_its_runs_interventions_and_hook_answers(
    tmp_path: Path, sqlite_backend: Backend
) -> None:
    (tmp_path / "watch_guard.py").write_text(GUARD, encoding="utf-8")
    with scripted_stub(SCRIPT, models=["stub-model"]) as server:
        config = tmp_path / "batch.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "batch": "noted",
                    "models": ["stub-model"],
                    "cycles": 2,
                    "ollama": {"host": server.url},
                    "storage": sqlite_backend.storage_yaml(),
                    **NOTED,
                }
            ),
            encoding="utf-8",
        )
        done = cli(sqlite_backend, "batch", str(config))
    assert done.returncode == 0, done.stdout + done.stderr
    for line in LINES:
        assert f"  noted.stub-model.r1: {line}\n" in done.stdout, done.stdout
