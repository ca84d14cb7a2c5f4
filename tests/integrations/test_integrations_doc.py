"""docs/integrations.md, word for word: a study in `inspect view`, a run watched in Phoenix.

The commands are read from the page's bash blocks and run in a scratch folder whose
`.venv/bin/contreact` and `.venv/bin/inspect` start this checkout's (as the README's
quickstart test does). As the page says, its `pip install -e` lines are skipped (this
environment has the extras) and its ports are replaced by free ones; everything else runs
as written, Phoenix's own venv and its install included. Each viewer is started on
127.0.0.1 and asked over HTTP what it holds: `inspect view` its log list and the study's
log, Phoenix the spans of its `contreact` project.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from contreact.checkpoints.engines import engine_for
from contreact.checkpoints.event_store import read_events
from contreact.stub import StubServer
from support.backends import Backend
from support.batches import run_batch
from support.cli import cli_env
from support.paths import ROOT

pytestmark = [pytest.mark.integrations, pytest.mark.slow]

DOC = ROOT / "docs" / "integrations.md"


def blocks(heading: str) -> list[list[str]]:
    """The bash blocks of the page's section `heading`, as lists of command lines."""
    page = DOC.read_text(encoding="utf-8")
    section = page.split(f"## {heading}", 1)[1].split("\n## ", 1)[0]
    return [
        [line.strip() for line in block.splitlines() if line.strip()]
        for block in re.findall(r"```bash\n(.*?)```", section, re.S)
    ]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return json.loads(answer.read())


def wait_for(
    what: str, check: Callable[[], bool], proc: subprocess.Popen[str], folder: Path, timeout: float
) -> None:
    """Wait until `check()` holds; fail with the server's output if it died or never did."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if check():
                return
        except OSError:
            pass  # not listening yet
        if proc.poll() is not None or time.monotonic() > deadline:
            stop(proc)
            said = "\n".join(p.read_text(encoding="utf-8") for p in folder.glob("server-*.log"))
            raise AssertionError(f"{what} never held; the server said:\n{said[-3000:]}")
        time.sleep(0.5)


def stop(server: subprocess.Popen[str]) -> None:
    """End a server this test started, and whatever its shell started (its session)."""
    if server.poll() is None:
        os.killpg(server.pid, signal.SIGTERM)
    try:
        server.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait(timeout=30)


@pytest.fixture
def scratch(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    """A folder with `.venv/bin/contreact` and `.venv/bin/inspect`; the environment to use."""
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "contreact").write_text(
        f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m contreact "$@"\n', encoding="utf-8"
    )
    inspect = Path(sys.executable).parent / "inspect"
    (bin_dir / "inspect").write_text(f'#!/bin/sh\nexec {shlex.quote(str(inspect))} "$@"\n')
    for script in bin_dir.iterdir():
        script.chmod(0o755)
    env = {
        k: v for k, v in cli_env().items() if not k.startswith(("CONTREACT_", "OLLAMA_", "OTEL_"))
    }
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env["HOME"] = str(tmp_path / "home")  # the viewers keep their state there
    yield tmp_path, env


def run_lines(
    lines: list[str], cwd: Path, env: dict[str, str], ports: dict[str, int]
) -> list[subprocess.Popen[str]]:
    """Run the lines in order (a line ending in `&` in the background); returns those servers."""
    servers = []
    for line in lines:
        if "pip install -e" in line:
            continue
        for written, free in ports.items():
            line = line.replace(written, str(free))
        if line.endswith("&"):
            # A session of its own: the server and the shell that starts it end together.
            # Its output goes to a file: a pipe nobody reads would stall a chatty server.
            with (cwd / f"server-{len(servers)}.log").open("w", encoding="utf-8") as log:
                servers.append(
                    subprocess.Popen(
                        ["bash", "-c", line[:-1].strip()],
                        cwd=cwd,
                        env=env,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        text=True,
                        start_new_session=True,
                    )
                )
            continue
        # Installing Phoenix takes minutes, more on a busy machine; a command, seconds.
        timeout = 1800 if "pip install" in line else 300
        done = subprocess.run(
            ["bash", "-c", line], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
        )
        assert done.returncode == 0, f"{line}\n{done.stdout}\n{done.stderr}"
    return servers


def test_inspect_view_serves_an_exported_study(scratch: tuple[Path, dict[str, str]]) -> None:
    from support.extras import needs

    needs("inspect_ai", "inspect")
    folder, env = scratch
    (open_study, bundle) = blocks("Open a study in `inspect view`")
    with StubServer(models=["stub-a", "stub-b"]).start() as server:
        # 2 models x 2 replicates x 3 cycles, as the export's own test.
        run_ids = run_batch(
            Backend("sqlite", folder / "runs"), server, "my-batch", ["stub-a", "stub-b"]
        )
    *commands, serve = open_study
    assert serve.startswith(".venv/bin/inspect view") and "--port 7575" in serve
    port = free_port()
    run_lines(commands, folder, env, {})
    (viewer,) = run_lines([serve + " &"], folder, env, {"7575": port})
    base = f"http://127.0.0.1:{port}/api"
    try:
        wait_for(
            "the log list", lambda: bool(get(f"{base}/log-files")["files"]), viewer, folder, 120
        )
        (listed,) = get(f"{base}/log-files")["files"]
        (written,) = (folder / "inspect-logs").iterdir()
        assert listed["name"].endswith(f"/inspect-logs/{written.name}")
        assert listed["task"] == "my-batch"
        log = get(f"{base}/logs/{urllib.parse.quote(listed['name'], safe='')}")
        assert log["status"] == "success"
        assert [s["id"] for s in log["samples"]] == run_ids
        for sample in log["samples"]:
            roles = Counter(m["role"] for m in sample["messages"])
            assert roles["system"] == 1 and roles["user"] >= 2 and roles["assistant"] >= 2
            assert set(sample["scores"]) >= {"memory_tool_ops", "response_chars"}
    finally:
        stop(viewer)
    (line,) = bundle
    run_lines([line], folder, env, {})
    site = folder / "inspect-site"
    assert (site / "index.html").is_file()
    assert [p.name for p in (site / "logs").glob("*.eval")] == [written.name]


def test_phoenix_shows_a_traced_run(scratch: tuple[Path, dict[str, str]]) -> None:
    from support.extras import needs

    needs("openinference.instrumentation.langchain", "otel")
    folder, env = scratch
    ((*setup, serve, run),) = blocks("Watch a run in Phoenix")
    assert "phoenix serve" in serve and run.endswith("contreact run my-run.yaml")
    ports = {"6006": free_port(), "4317": free_port()}
    with StubServer(models=["llama3.1:8b"]).start() as server:
        (folder / "my-run.yaml").write_text(
            f"run_id: explorer-1\nmodel: llama3.1:8b\ncycles: 2\nollama: {{host: {server.url}}}\n",
            encoding="utf-8",
        )
        run_lines(setup, folder, env, ports)
        (phoenix,) = run_lines([serve], folder, env, ports)
        base = f"http://127.0.0.1:{ports['6006']}"
        try:
            wait_for(
                "Phoenix's health",
                lambda: urllib.request.urlopen(f"{base}/healthz").status == 200,
                phoenix,
                folder,
                300,
            )
            run_lines([run], folder, env, ports)
            events = read_events(
                engine_for(Backend("sqlite", folder / "runs").storage()), "explorer-1"
            )
            wanted = Counter(
                {
                    "AGENT": 1,
                    "CHAIN": sum(e["event_type"] == "CYCLE_END" for e in events),
                    "LLM": sum(e["event_type"] == "LLM_INVOCATION" for e in events),
                    "TOOL": sum(e["event_type"] == "TOOL_CALL" for e in events),
                }
            )

            def kinds() -> Counter[str]:
                spans = get(f"{base}/v1/projects/contreact/spans?limit=1000")["data"]
                return Counter(s["span_kind"] for s in spans)

            wait_for(f"{wanted} in Phoenix", lambda: kinds() == wanted, phoenix, folder, 60)
            spans = get(f"{base}/v1/projects/contreact/spans?limit=1000")["data"]
            assert {s["context"]["trace_id"] for s in spans} == {spans[0]["context"]["trace_id"]}
            (agent,) = [s for s in spans if s["span_kind"] == "AGENT"]
            assert agent["name"] == "run explorer-1"
        finally:
            stop(phoenix)
