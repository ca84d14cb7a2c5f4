"""The CLI in pipes: whole rows, one JSON document, a quiet SIGPIPE, each error once.

Commands run as a shell runs them (`bash -c "... | cat"`), against the stub over real
HTTP and a real SQLite database.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import yaml

from contreact.stub import StubServer
from support.backends import Backend
from support.cli import cli, cli_env, cli_in_process
from support.paths import ROOT
from support.runs import write_config
from support.stub import scripted_stub

LONG_ID = "a-run-whose-id-is-exactly-sixty-characters-long-0123456789ab"


def shell(backend: Backend, pipeline: str) -> subprocess.CompletedProcess[str]:
    """Run `contreact ARGS | ...` in bash with pipefail: the status is contreact's own."""
    contreact = shlex.join([sys.executable, "-m", "contreact", *backend.cli_args])
    return subprocess.run(
        ["bash", "-c", "set -o pipefail; " + pipeline.replace("contreact", contreact, 1)],
        cwd=ROOT,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def test_list_in_a_pipe_prints_whole_rows(tmp_path: Path, sqlite_backend: Backend) -> None:
    assert len(LONG_ID) == 60
    with StubServer().start() as server:
        config = write_config(
            tmp_path / "c.yaml",
            sqlite_backend,
            run_id=LONG_ID,
            cycles=1,
            ollama={"host": server.url},
        )
        assert cli_in_process(sqlite_backend, "run", str(config)).returncode == 0
    listed = shell(sqlite_backend, "contreact list | cat")
    assert listed.returncode == 0, listed.stderr
    header, row = listed.stdout.splitlines()
    assert header.split("\t") == ["run", "status", "origin", "model", "cycles", "updated"]
    assert row.split("\t")[:5] == [LONG_ID, "completed", "cli", "stub-model", "1/1"]
    assert "\x1b[" not in listed.stdout and "…" not in listed.stdout


def test_batch_json_is_one_document(tmp_path: Path, sqlite_backend: Backend) -> None:
    with StubServer().start() as server:
        config = tmp_path / "batch.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "batch": "piped",
                    "models": ["stub-model"],
                    "replicates": 1,
                    "cycles": 1,
                    "ollama": {"host": server.url},
                }
            ),
            encoding="utf-8",
        )
        result = shell(sqlite_backend, f"contreact batch {config} --json | python3 -m json.tool")
        host = server.url
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert [(r["run_id"], r["status"], r["cycles"]) for r in summary] == [
        ("piped.stub-model.r1", "completed", 1)
    ]
    # The progress a person would want still comes, on stderr.
    assert "batch piped: 1 runs" in result.stderr
    assert "piped.stub-model.r1: cycle 1/1 done" in result.stderr
    # Where the batch stands, read from the database (as from another machine).
    shown = shell(sqlite_backend, "contreact batch --status piped | cat")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines()[0].split("\t") == [
        "run",
        "model",
        "cycle",
        "step",
        "status",
        "tok/s",
        "ETA",
        "host",
        "driver",
        "worker",
    ]
    row = shown.stdout.splitlines()[1].split("\t")
    assert row[:5] == ["piped.stub-model.r1", "stub-model", "1/1 ✓", "", "completed"]
    assert row[7:] == [host, "", ""]  # its host; no process drives it any more, no queue
    standing = json.loads(shell(sqlite_backend, "contreact batch --status piped --json").stdout)
    assert [(r["run_id"], r["cycles_done"], r["status"]) for r in standing] == [
        ("piped.stub-model.r1", 1, "completed")
    ]
    unknown = shell(sqlite_backend, "contreact batch --status nosuch")
    assert unknown.returncode == 2 and "no runs of a batch named nosuch" in unknown.stderr


def test_export_into_head_ends_quietly(tmp_path: Path, sqlite_backend: Backend) -> None:
    # A reflection of 200 kB: the export is larger than a pipe's buffer (64 kB), so
    # `head` really closes the pipe while contreact is still writing.
    big = "All work and no play makes Jack a dull boy. " * 4600
    with scripted_stub({1: [{"content": big}]}) as server:
        config = write_config(
            tmp_path / "c.yaml", sqlite_backend, run_id="big", cycles=1, ollama={"host": server.url}
        )
        assert cli_in_process(sqlite_backend, "run", str(config), "--quiet").returncode == 0
    for fmt in ("jsonl", "csv"):
        result = shell(sqlite_backend, f"contreact export big --format {fmt} | head -1")
        assert (result.returncode, result.stderr) == (0, ""), (fmt, result.stderr)
        assert len(result.stdout.splitlines()) == 1


def test_a_failed_run_says_so_once_on_stderr(tmp_path: Path, sqlite_backend: Backend) -> None:
    with StubServer(models=["other-model"]).start() as server:
        config = write_config(
            tmp_path / "c.yaml",
            sqlite_backend,
            run_id="nomodel",
            model="llama3.1:8b",
            cycles=1,
            ollama={"host": server.url},
        )
        result = cli(sqlite_backend, "run", str(config))
    assert result.returncode == 1
    said = [line for line in (result.stdout + result.stderr).splitlines() if "failed" in line]
    assert said == [line for line in result.stderr.splitlines() if line], said
    assert len(said) == 1 and said[0].startswith("contreact: run nomodel failed: ")


def test_version_and_completion(sqlite_backend: Backend) -> None:
    from importlib.metadata import version

    shown = cli(sqlite_backend, "--version")
    assert (shown.returncode, shown.stdout) == (0, f"contreact {version('contreact')}\n")
    helped = cli(sqlite_backend, "--help")
    assert "--install-completion" in helped.stdout and "--show-completion" in helped.stdout


def test_an_extended_run_numbers_its_new_cycles(tmp_path: Path, sqlite_backend: Backend) -> None:
    with StubServer().start() as server:
        config = write_config(
            tmp_path / "c.yaml", sqlite_backend, run_id="ext", cycles=2, ollama={"host": server.url}
        )
        assert cli(sqlite_backend, "run", str(config)).returncode == 0
        more = cli(sqlite_backend, "resume", "ext", "--cycles", "2")
    assert more.returncode == 0, more.stderr
    assert "resuming run ext at cycle 3 · model stub-model" in more.stdout
    labels = re.findall(r"^cycle (\d+) reflection:", more.stdout, re.M)
    assert labels == ["3", "4"], more.stdout
    steps = set(re.findall(r"^cycle (\d+) · step \d+", more.stdout, re.M))
    assert steps == {"3", "4"}, more.stdout


def imported_by(backend: Backend, *args: str) -> set[str]:
    """The modules `contreact ARGS` imports (python -X importtime)."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "contreact", *backend.cli_args, *args],
        cwd=ROOT,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return {line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines() if "|" in line}


def test_read_only_commands_start_without_the_engine(
    tmp_path: Path, sqlite_backend: Backend
) -> None:
    from contreact.checkpoints import peek
    from contreact.checkpoints.cycles import cycle_records
    from contreact.checkpoints.engines import engine_for
    from contreact.checkpoints.locations import DB_FILENAME
    from contreact.checkpoints.registry import list_runs

    with StubServer().start() as server:
        for name, cycles in (("first", 2), ("second", 1)):
            config = write_config(
                tmp_path / f"{name}.yaml",
                sqlite_backend,
                run_id=name,
                cycles=cycles,
                ollama={"host": server.url},
            )
            assert cli_in_process(sqlite_backend, "run", str(config), "-q").returncode == 0
    heavy = ("sqlalchemy", "langgraph", "langchain_core", "langchain_ollama", "matplotlib")
    for args in (["--help"], ["list"], ["status", "first"], ["list", "--json"]):
        loaded = imported_by(sqlite_backend, *args)
        assert not {m for m in loaded if m.split(".")[0] in heavy}, args
    # The standard-library read says what the registry says.
    folder = peek.sqlite_folder(str(sqlite_backend.data_dir), None)
    storage = sqlite_backend.storage()
    assert folder == storage.data_dir and DB_FILENAME == peek.DB_FILENAME
    engine = engine_for(storage)
    assert peek.read_runs(folder) == list_runs(engine)
    assert peek.cycle_counts(folder) == {
        r.run_id: len(cycle_records(engine, r.run_id)) for r in list_runs(engine)
    }
    assert peek.cycle_counts(folder, "second") == {"second": 1}


def test_a_run_whose_reader_goes_away_goes_on(tmp_path: Path, sqlite_backend: Backend) -> None:
    with StubServer().start() as server:
        config = write_config(
            tmp_path / "c.yaml",
            sqlite_backend,
            run_id="headless",
            cycles=3,
            ollama={"host": server.url},
        )
        result = shell(sqlite_backend, f"contreact run {config} | head -1")
    assert (result.returncode, result.stderr) == (0, ""), result.stderr
    assert result.stdout == "starting run headless · model stub-model\n"
    status = json.loads(cli(sqlite_backend, "status", "headless", "--json").stdout)
    assert (status["status"], status["cycles_completed"]) == ("completed", 3)
