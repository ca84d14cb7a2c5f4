"""The documented batch example, run as written against the stub and PostgreSQL.

`examples/batch.yaml` is the study docs/commands.md shows; the test changes only what cannot
exist here (the two GPU hosts become two stub servers, the lab's database the test's) and
checks that the runs land in the config's storage, that every command finds them there
with `--storage`, and that the docs show the same file.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from contreact.stub import StubServer
from support.backends import Backend
from support.cli import cli_in_process
from support.paths import ROOT

EXAMPLE = ROOT / "examples" / "batch.yaml"


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
    with (
        StubServer(models=example["models"]).start() as a,
        StubServer(models=example["models"]).start() as b,
    ):
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
        assert len(a.requests()) > 0 and len(b.requests()) > 0

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
