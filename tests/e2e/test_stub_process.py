"""`python -m contreact.stub` as a process: one `STUB READY URL` line, serves, exits on SIGTERM."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import httpx

from support.paths import ROOT


def test_cli_prints_ready_serves_and_exits_on_sigterm(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "contreact.stub",
            "--port",
            "0",
            "--scenario",
            "demo",
            "--models",
            "cli-model",
            "--record",
            str(tmp_path / "r.jsonl"),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        assert line.startswith("STUB READY http://127.0.0.1:"), line
        url = line.split()[-1]
        names = [m["name"] for m in httpx.get(f"{url}/api/tags", timeout=5).json()["models"]]
        assert names == ["cli-model:latest", "stub-embed:latest"]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=5) == 0
        assert proc.stdout.read() == ""  # exactly one line on stdout
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert json.loads((tmp_path / "r.jsonl").read_text())["path"] == "/api/tags"
