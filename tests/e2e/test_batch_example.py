"""The documented batch example, run as written against `contreact stub` and PostgreSQL.

`examples/batch.yaml` is the study docs/commands.md shows; the test changes only what cannot
exist here (the two GPU hosts become two `contreact stub --models-of examples/batch.yaml`
processes, as the docs tell a newcomer to start them, the lab's database the test's) and
checks that the runs land in the config's storage, that every command finds them there
with `--storage`, and that the docs show the same file.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import yaml

from support.backends import Backend
from support.cli import cli_env, cli_in_process
from support.paths import ROOT

EXAMPLE = ROOT / "examples" / "batch.yaml"


@dataclass(frozen=True)
class Served:
    url: str


@contextmanager
def stub_of(config: Path) -> Iterator[Served]:
    """`contreact stub --models-of CONFIG` as a person starts it (on a free port)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "contreact", "stub", "--models-of", str(config), "--port", "0"],
        cwd=ROOT,
        env=cli_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        said = proc.stdout.readline()
        assert all(model in said for model in ("llama3.1:8b", "qwen3:8b", "mistral-nemo:12b"))
        ready = proc.stdout.readline()
        assert ready.startswith("STUB READY "), ready + proc.stderr.read()  # type: ignore[union-attr]
        yield Served(ready.split()[-1])
    finally:
        proc.terminate()
        assert proc.wait(timeout=30) == 0


def test_the_docs_show_the_example_file_word_for_word() -> None:
    docs = (ROOT / "docs" / "commands.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```yaml\n(.*?)```", docs, flags=re.S)
    body = "".join(
        line + "\n"
        for line in EXAMPLE.read_text(encoding="utf-8").splitlines()
        if not line.startswith("#")
    )
    assert body in blocks


def test_the_batch_example_runs_into_the_configs_storage(
    tmp_path: Path, postgres_backend: Backend
) -> None:
    example = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    nowhere = Backend("default", tmp_path / "cwd-runs")  # no flags: the CLI's own default
    with stub_of(EXAMPLE) as a, stub_of(EXAMPLE) as b:
        text = EXAMPLE.read_text(encoding="utf-8")
        text = text.replace("http://gpu1:11434", a.url).replace("http://gpu2:11434", b.url)
        text = text.replace("postgresql+psycopg://lab@db/contreact", str(postgres_backend.db_url))
        config = tmp_path / "batch.yaml"
        config.write_text(text, encoding="utf-8")

        done = cli_in_process(nowhere, "batch", str(config), "--json", timeout=600)
        assert done.returncode == 0, done.stderr
        results = json.loads(done.stdout)
        runs = len(example["models"]) * example["replicates"]
        assert [r["status"] for r in results] == ["completed"] * runs
        assert {r["host"] for r in results} == {a.url, b.url}

    # Nothing went to the default SQLite file; the commands find the runs with --storage.
    assert not (tmp_path / "cwd-runs" / "contreact.db").exists()
    url = str(postgres_backend.db_url)
    listed = cli_in_process(nowhere, "list", "--json", "--storage", url)
    assert listed.returncode == 0, listed.stderr
    assert (
        len([r for r in json.loads(listed.stdout) if r["run_id"].startswith("left-alone.")]) == runs
    )
    first = results[0]["run_id"]
    status = cli_in_process(nowhere, "status", first, "--json", "--storage", url)
    assert status.returncode == 0 and json.loads(status.stdout)["status"] == "completed"
    watch = cli_in_process(nowhere, "batch", "--status", "left-alone", "--json", "--storage", url)
    assert watch.returncode == 0, watch.stderr
    assert len(json.loads(watch.stdout)) == runs
