"""One storage flag: every command that reads or writes runs takes `--storage` after its name.

The commands are found by walking the typer application, so a new command that touches runs
without the flag fails here. The exceptions read no runs at all and are named with why; the
old global `--data-dir`/`--db-url` are hidden, and given after a command's name they are
refused with a line that names `--storage` (tests/e2e/test_operator_e2e.py runs that).
"""

from __future__ import annotations

from typing import Any

from typer.main import get_command

from contreact.cli import app

NO_RUNS = {
    "stub": "serves the bundled Ollama-compatible stub; stores nothing",
    "graph": "draws the graph from the code; reads no storage",
}


def commands() -> dict[str, Any]:
    """The application's commands by name (typer's own click classes)."""
    return dict(get_command(app).commands)  # type: ignore[attr-defined]


def flags(command: Any) -> set[str]:
    return {flag for param in command.params for flag in param.opts}


def test_every_command_that_touches_runs_takes_storage() -> None:
    found = commands()
    assert {"operator", "reply", "demo", "list", "show", "pei", "worker"} <= set(found)
    assert set(NO_RUNS) <= set(found), "an exception names a command that is gone"
    missing = [
        name for name in found if name not in NO_RUNS and "--storage" not in flags(found[name])
    ]
    assert missing == []
    assert [name for name in NO_RUNS if "--storage" in flags(found[name])] == []


def test_the_old_global_flags_are_hidden_and_no_command_shows_another_storage_flag() -> None:
    group = get_command(app)
    shown = {f for p in group.params if not getattr(p, "hidden", False) for f in p.opts}
    assert not shown & {"--data-dir", "--db-url"}
    for name, command in commands().items():
        visible = {f for p in command.params if not getattr(p, "hidden", False) for f in p.opts}
        assert not visible & {"--data-dir", "--db-url"}, name
