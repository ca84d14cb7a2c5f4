"""The README contract: exactly two set-up commands; CI runs the test one; the first works fresh."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from support.paths import ROOT


def setup_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Set up", 1)[1].split("\n## ", 1)[0]
    return [block.strip() for block in re.findall(r"```bash\n(.*?)```", section, re.S)]


def test_exactly_two_setup_commands_and_ci_runs_the_test_one() -> None:
    commands = setup_commands()
    assert len(commands) == 2 and all("\n" not in c for c in commands), commands
    assert "contreact demo" in commands[0]
    assert commands[1] in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def newcomer_env() -> dict[str, str]:
    """The caller's environment without this checkout's virtual environment or settings."""
    venv = str(ROOT / ".venv")
    path = [p for p in os.environ.get("PATH", "").split(os.pathsep) if not p.startswith(venv)]
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("CONTREACT_", "VIRTUAL_ENV"))}
    return {**keep, "PATH": os.pathsep.join(path)}


def test_newcomer_install_and_demo(tmp_path: Path) -> None:
    """The first command, as a newcomer runs it: a copy of the project, a fresh venv, no Ollama."""
    files = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    copy = tmp_path / "contreact"
    for name in files:
        source = ROOT / name
        if source.is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, copy / name)
    result = subprocess.run(
        ["bash", "-c", setup_commands()[0]],
        cwd=copy,
        capture_output=True,
        text=True,
        timeout=900,
        env=newcomer_env(),
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert len(re.findall(r"^cycle \d+ reflection: \S", result.stdout, re.M)) >= 3, result.stdout
    assert re.search(r"^run demo-\S+ completed$", result.stdout, re.M)
