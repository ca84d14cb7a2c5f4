"""`contreact graph`: the compiled graph drawn as mermaid, ascii and PNG, with no network.

The CLI runs in a subprocess whose proxies point at a closed local port, so any attempt
to reach a web renderer (LangChain's mermaid.ink fallback) fails instead of silently
succeeding on a machine that happens to be online.
"""

from __future__ import annotations

import re
import struct
import subprocess
import sys
from pathlib import Path

from support.backends import Backend
from support.cli import cli, cli_env

NODES = {"assemble", "invoke", "parse", "dispatch", "reflect"}
FIXED = {
    ("__start__", "assemble"),
    ("assemble", "invoke"),
    ("invoke", "parse"),
    ("dispatch", "assemble"),
}
CONDITIONAL = {
    ("parse", "dispatch"),
    ("parse", "assemble"),
    ("parse", "reflect"),
    ("reflect", "assemble"),
    ("reflect", "__end__"),
}
# Port 9 (discard) is closed on test machines: a request through this proxy fails at once.
OFFLINE = {
    "HTTP_PROXY": "http://127.0.0.1:9",
    "HTTPS_PROXY": "http://127.0.0.1:9",
    "ALL_PROXY": "http://127.0.0.1:9",
    "http_proxy": "http://127.0.0.1:9",
    "https_proxy": "http://127.0.0.1:9",
    "all_proxy": "http://127.0.0.1:9",
    "NO_PROXY": "",
    "no_proxy": "",
}
# Mermaid edges: `a --> b;`, `a -.-> b;`, or labelled `a -- x --> b;` / `a -. x .-> b;`.
MERMAID_EDGE = re.compile(r"^\s*(\w+)\s+(-->|-\.->|--\s.*?\s-->|-\.\s.*?\s\.->)\s*(\w+);\s*$")


def mermaid_edges(text: str) -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    fixed: set[tuple[str, str]] = set()
    conditional: set[tuple[str, str]] = set()
    for line in text.splitlines():
        match = MERMAID_EDGE.match(line)
        if match:
            source, arrow, target = match.groups()
            (conditional if arrow.startswith("-.") else fixed).add((source, target))
    return fixed, conditional


def test_mermaid_on_stdout_names_nodes_and_conditional_edges(sqlite_backend: Backend) -> None:
    result = cli(sqlite_backend, "graph", env=OFFLINE)
    assert result.returncode == 0, result.stderr
    assert "graph TD;" in result.stdout
    for node in NODES:
        assert re.search(rf"^\s*{node}\({node}\)\s*$", result.stdout, re.M), node
    fixed, conditional = mermaid_edges(result.stdout)
    assert fixed == FIXED
    assert conditional == CONDITIONAL


def test_png_is_rendered_offline(tmp_path: Path, sqlite_backend: Backend) -> None:
    target = tmp_path / "out" / "contreact.png"
    result = cli(sqlite_backend, "graph", "--format", "png", "--output", str(target), env=OFFLINE)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(target.resolve())
    assert result.stderr == ""
    data = target.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    # IHDR comes first: a real picture of seven nodes, not an empty canvas.
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    assert width > 200 and height > 400
    assert len(data) > 10_000


def test_png_defaults_to_graph_png_in_the_working_directory(
    tmp_path: Path, sqlite_backend: Backend
) -> None:
    # Not through `cli`: that runs in the repository root, where graph.png must not land.
    result = subprocess.run(
        [sys.executable, "-m", "contreact", *sqlite_backend.cli_args, "graph", "-f", "png"],
        cwd=tmp_path,
        env=cli_env(OFFLINE),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(tmp_path.resolve() / "graph.png")
    assert (tmp_path / "graph.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_ascii_prints_every_node_and_edge(sqlite_backend: Backend) -> None:
    result = cli(sqlite_backend, "graph", "--format", "ascii", env=OFFLINE)
    assert result.returncode == 0, result.stderr
    for node in NODES:
        assert node in result.stdout
    if "[parse]" in result.stdout:  # the built-in drawing (grandalf not installed)
        block = result.stdout.split("[parse]", 1)[1].split("[", 1)[0]
        lines = block.strip().splitlines()
        assert {line.split()[1] for line in lines} == {"assemble", "dispatch", "reflect"}
        # The router's choices are labelled with why they are taken.
        assert {line.split()[-1] for line in lines} == {"(calls)", "(retry)", "(final)"}
        assert all(line.strip().startswith("-.->") for line in block.strip().splitlines())


def test_text_formats_write_to_output(tmp_path: Path, sqlite_backend: Backend) -> None:
    target = tmp_path / "graph.mmd"
    result = cli(sqlite_backend, "graph", "--output", str(target))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(target.resolve())
    assert mermaid_edges(target.read_text(encoding="utf-8"))[1] == CONDITIONAL


def test_bad_input_is_one_line_exit_2(tmp_path: Path, sqlite_backend: Backend) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    result = cli(sqlite_backend, "graph", "-f", "png", "-o", str(blocker / "graph.png"))
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1
    assert "cannot write" in result.stderr and str(blocker) in result.stderr
    assert cli(sqlite_backend, "graph", "--format", "svg").returncode == 2
