"""Progress as a newcomer sees it: a live status on a terminal, plain lines in a pipe."""

from __future__ import annotations

import re
from pathlib import Path

from support.backends import Backend
from support.cli import Terminal, cli
from support.stub import scripted_stub


def test_demo_on_a_terminal_shows_cycle_and_step(sqlite_backend: Backend) -> None:
    term = Terminal(sqlite_backend, "demo", "--cycles", "2", "--run-id", "shown")
    term.expect(r"run shown completed")
    assert term.close() == 0
    screen = term.transcript
    # The live status line (redrawn in place) says where the run is and what it is doing.
    assert re.search(
        r"cycle [12]/2 · step \d+ · (assembling the prompt|waiting for the model|"
        r"reading the answer|running tools|closing the cycle)",
        screen,
    ), screen
    assert re.search(r"cycle 1 · step 1 · \d+ tokens out in [\d.]+ s · [\d.]+ tok/s", screen)
    assert screen.index("cycle 1 reflection: ") < screen.index("cycle 2 reflection: ")


def test_plain_lines_and_quiet_in_a_pipe(sqlite_backend: Backend) -> None:
    loud = cli(sqlite_backend, "demo", "--cycles", "1", "--run-id", "piped")
    assert loud.returncode == 0
    assert "\x1b[" not in loud.stdout, "no terminal codes when stdout is not a TTY"
    assert "cycle 1 · step 1 ·" in loud.stdout and "write →" in loud.stdout
    quiet = cli(sqlite_backend, "demo", "--cycles", "1", "--run-id", "hushed", "--quiet")
    assert quiet.returncode == 0
    assert "· step" not in quiet.stdout and "write →" not in quiet.stdout
    assert "cycle 1 reflection:" in quiet.stdout


def test_the_runner_names_each_node_as_it_starts(tmp_path: Path) -> None:
    """The status line's "what it is doing" comes from a hook each node's step calls."""
    from contreact.checkpoints.storage import resolve_storage
    from contreact.config import parse_config
    from contreact.engine.outcome import SilentProgress
    from contreact.engine.runner import start_run

    class Recorder(SilentProgress):
        def __init__(self) -> None:
            self.nodes: list[str] = []

        def node_started(self, node: str) -> None:
            self.nodes.append(node)

    script = {1: [{"tool_calls": [{"name": "list_memories", "arguments": {}}]}, {"content": "n"}]}
    progress = Recorder()
    with scripted_stub(script) as server:
        config = parse_config(
            {"run_id": "named", "model": "stub-model", "cycles": 1, "ollama": {"host": server.url}},
            "test",
        )
        outcome = start_run(config, resolve_storage(tmp_path), progress=progress)
    assert outcome.status == "completed", outcome.reason
    assert progress.nodes == [
        "assemble", "invoke", "parse", "dispatch",
        "assemble", "invoke", "parse", "reflect",
    ]  # fmt: skip
