"""The README's real-Ollama quickstart, word for word, against `contreact stub`.

The commands are read from README.md's "With a real Ollama" section, so a change there
is tested as written. As the README says, `ollama pull` is skipped (the stub serves the
example's model) and the stub, on a free port, is named by `OLLAMA_HOST`. The commands
run in a scratch folder holding `examples/explorer.yaml` and a `.venv/bin/contreact`
that starts this checkout's contreact.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.cli import cli_env
from support.paths import ROOT


def quickstart_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## With a real Ollama", 1)[1].split("\n## ", 1)[0]
    block = re.findall(r"```bash\n(.*?)```", section, re.S)[0]
    return [line.strip() for line in block.splitlines() if line.strip()]


@pytest.fixture
def stub_url() -> Iterator[str]:
    """`contreact stub` as a user starts it (on a free port instead of 11434)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "contreact", "stub", "--port", "0"],
        cwd=ROOT,
        env=cli_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("STUB READY "):
                yield line.split()[-1]
                break
        else:
            raise AssertionError(f"contreact stub did not start: {proc.stderr}")
    finally:
        proc.terminate()
        assert proc.wait(timeout=30) == 0


def test_the_quickstart_runs_against_contreact_stub(tmp_path: Path, stub_url: str) -> None:
    commands = quickstart_commands()
    assert commands[0].startswith("ollama pull llama3.1:8b")
    (tmp_path / "examples").mkdir()
    shutil.copy(ROOT / "examples" / "explorer.yaml", tmp_path / "examples")
    launcher = tmp_path / ".venv" / "bin" / "contreact"
    launcher.parent.mkdir(parents=True)
    launcher.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m contreact "$@"\n')
    launcher.chmod(0o755)
    env = {k: v for k, v in cli_env().items() if not k.startswith(("CONTREACT_", "OLLAMA_"))}
    env["OLLAMA_HOST"] = stub_url
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    outputs = []
    for command in commands[1:]:
        done = subprocess.run(
            ["bash", "-c", command],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            stdin=subprocess.DEVNULL,
        )
        assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
        outputs.append(done.stdout)
    doctor, run, show, memory = outputs[-4:]
    assert "FAIL" not in doctor and "llama3.1:8b" in doctor
    assert re.search(r"^run explorer-1 completed$", run, re.M)
    assert re.findall(r"^Cycle (\d+)(?: \[.*\])?$", show, re.M) == [str(c) for c in range(1, 11)]
    assert json.loads(memory), "the agent stored something"
