"""Every hint a command prints runs as printed, storage included.

The runs here are stored where only their config says (a `storage` section, or a
PostgreSQL URL), and each suggested `contreact ...` is run exactly as printed: from
another folder, with no storage in the environment. Without `--storage WHERE` in the hint
it would look in ./runs and answer "no run named ...".
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from contreact.stub import StubServer
from support.backends import Backend
from support.cli import cli_env
from support.paths import ROOT
from support.stub import scripted_stub

HINT = re.compile(r"`(contreact [^`]+)`")


def contreact(desk: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`contreact ARGS` typed in `desk`, a folder with no runs, no storage in the environment."""
    env = {k: v for k, v in cli_env().items() if not k.startswith(("CONTREACT_", "OLLAMA_"))}
    return subprocess.run(
        [sys.executable, "-m", "contreact", *args],
        cwd=desk,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )


def hints(text: str) -> list[str]:
    return HINT.findall(text)


def as_printed(desk: Path, hint: str, **fill: str) -> subprocess.CompletedProcess[str]:
    """Run a printed hint, its placeholders (N, TEXT) filled in."""
    words = [fill.get(w, w) for w in shlex.split(hint)]
    assert words[0] == "contreact", hint
    return contreact(desk, *words[1:])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write(path: Path, config: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


def test_the_hints_of_a_run_stored_where_its_config_says_run_as_printed(tmp_path: Path) -> None:
    desk = tmp_path / "desk"
    desk.mkdir()
    lab = tmp_path / "lab-runs"
    port = free_port()
    config = write(
        tmp_path / "run.yaml",
        {
            "run_id": "hinted",
            "model": "stub-model",
            "cycles": 1,
            "ollama": {"host": f"http://127.0.0.1:{port}", "retries": 0, "timeout_s": 5},
            "storage": {"data_dir": str(lab)},
        },
    )
    failed = contreact(desk, "run", str(config))
    assert failed.returncode == 1
    [resume] = hints(failed.stderr)
    assert resume == f"contreact resume hinted --storage {lab}"
    with StubServer(port=port).start():  # the fix: the host answers now
        resumed = as_printed(desk, resume)
        assert resumed.returncode == 0, resumed.stderr
        again = contreact(desk, "run", str(config))
        assert again.returncode == 2
        [exists] = hints(again.stderr)
        completed = as_printed(desk, exists)
        assert completed.returncode == 2, completed.stderr
        [extend] = hints(completed.stderr)
        assert extend == f"contreact resume hinted --cycles N --storage {lab}"
        extended = as_printed(desk, extend, N="1")
        assert extended.returncode == 0, extended.stderr
    missing = contreact(desk, "status", "nosuch", "--storage", str(lab))
    assert missing.returncode == 2
    [listing] = hints(missing.stderr)
    listed = as_printed(desk, listing)
    assert listed.returncode == 0 and "hinted" in listed.stdout


def test_the_operators_hint_runs_as_printed(tmp_path: Path) -> None:
    desk = tmp_path / "desk"
    desk.mkdir()
    lab = tmp_path / "lab-runs"
    script = {
        1: [
            {"tool_calls": [{"name": "send_message_to_operator", "arguments": {"message": "Hi?"}}]},
            "Reflection 1.",
        ]
    }
    with scripted_stub(script) as server:
        config = write(
            tmp_path / "asks.yaml",
            {
                "run_id": "asks",
                "model": "stub-model",
                "cycles": 1,
                "ollama": {"host": server.url},
                "operator": {"mode": "queue"},
                "storage": {"data_dir": str(lab)},
            },
        )
        paused = contreact(desk, "run", str(config))
        assert paused.returncode == 3, paused.stderr
        printed = set(hints(paused.stdout))
        assert printed == {f"contreact reply asks TEXT --storage {lab}"}, paused.stdout
        replied = as_printed(desk, printed.pop(), TEXT="Hello")
    assert replied.returncode == 0, replied.stderr
    assert "run asks completed" in replied.stdout


def test_the_hints_of_a_queued_study_run_as_printed(
    tmp_path: Path, postgres_backend: Backend
) -> None:
    desk = tmp_path / "desk"
    desk.mkdir()
    url = str(postgres_backend.db_url)
    with StubServer().start() as server:
        config = write(
            tmp_path / "study.yaml",
            {
                "batch": "hinted",
                "models": ["stub-model"],
                "cycles": 1,
                "ollama": {"hosts": [server.url]},
                "storage": {"url": url},
            },
        )
        queued = contreact(desk, "batch", str(config), "--no-work")
        assert queued.returncode == 0, queued.stderr
        worker, follow = hints(queued.stdout)
        assert worker == f"contreact worker --storage {url}"
        assert follow == f"contreact batch --status hinted --storage {url}"
        shown = as_printed(desk, follow)
        assert shown.returncode == 0, shown.stderr
        assert "hinted.stub-model.r1" in shown.stdout
        worked = as_printed(desk, worker)
        assert worked.returncode == 0, worked.stdout + worked.stderr
    done = as_printed(desk, follow)
    assert re.search(r"hinted\.stub-model\.r1\tstub-model\t1/1 ✓\t\tcompleted", done.stdout)


def without_contreact_on_path(env: dict[str, str]) -> dict[str, str]:
    """`env` as a newcomer's shell has it: no storage set, no folder on PATH with `contreact`."""
    folders = env.get("PATH", "").split(os.pathsep)
    path = [f for f in folders if f and not (Path(f) / "contreact").exists()]
    kept = {k: v for k, v in env.items() if not k.startswith(("CONTREACT_", "VIRTUAL_ENV"))}
    return {**kept, "PATH": os.pathsep.join(path)}


def test_the_demos_hint_runs_as_printed_where_contreact_is_not_on_path(tmp_path: Path) -> None:
    """The README's `.venv/bin/contreact demo`; the hint it prints, typed into a shell."""
    setup = (ROOT / "README.md").read_text(encoding="utf-8").split("## Set up", 1)[1]
    first = re.search(r"```bash\n(.*?)```", setup, re.S)
    assert first is not None
    demo = next(part.strip() for part in first.group(1).split("&&") if "contreact demo" in part)
    assert demo == ".venv/bin/contreact demo"
    clone = tmp_path / "clone"  # as after the README's install: `.venv` in the current folder
    clone.mkdir()
    venv = Path(sys.executable).parent.parent
    assert (venv / "bin" / "contreact").exists(), "the dev install's console script is missing"
    (clone / ".venv").symlink_to(venv, target_is_directory=True)
    env = without_contreact_on_path(cli_env())
    assert shutil.which("contreact", path=env["PATH"]) is None

    def shell(line: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "-c", line],
            cwd=clone,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            stdin=subprocess.DEVNULL,
        )

    shown = shell(demo)
    assert shown.returncode == 0, shown.stderr
    printed = re.findall(r"`([^`]*contreact (?:show|memory) [^`]+)`", shown.stdout)
    assert len(printed) == 2, shown.stdout
    assert all(hint.startswith(".venv/bin/contreact ") for hint in printed), printed
    for hint in printed:
        done = shell(hint)
        assert done.returncode == 0, f"{hint}: {done.stderr}"
        assert done.stdout.strip(), hint
    assert shell(printed[0].replace(".venv/bin/contreact", "contreact", 1)).returncode == 127
