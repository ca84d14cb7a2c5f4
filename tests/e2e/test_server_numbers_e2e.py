"""Numbers from the server, through the CLI: a count no float can hold never stops a run.

A 401-digit `eval_count` in the final chunk made `run` exit with OverflowError from the
progress line; the answer was journaled, so every `resume` replayed it and failed the
same way. Now it is recorded as absent, named on its LLM_INVOCATION, and every view of
the run (show, export, status, the report's tables) reads it through the same check.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from contreact.stub import StubServer
from support.backends import Backend
from support.cli import cli, cli_in_process
from support.fuzz import HUGE, Case, FuzzServer, answer_with_numbers
from support.runs import read_log, write_config


def test_a_401_digit_eval_count_is_absent_and_flagged_and_the_run_completes(
    tmp_path: Path, sqlite_backend: Backend
) -> None:
    huge = Case(
        "401-digit eval_count",
        "content",
        "issue 31",
        answer_with_numbers("Reflection: a huge count.", prompt_eval_count="7", eval_count=HUGE),
    )
    inner = StubServer.from_scenario({"agent": "scripted", "script": {}}).start()
    fuzz = FuzzServer([huge], inner).start()
    try:
        config = write_config(
            tmp_path / "c.yaml", sqlite_backend, cycles=2, ollama={"host": fuzz.url}
        )
        done = cli(sqlite_backend, "run", str(config))
    finally:
        fuzz.stop()
        inner.stop()
    assert fuzz.served == ["401-digit eval_count"]
    assert done.returncode == 0 and done.stderr == "", done.stderr

    calls = [e for e in read_log(sqlite_backend, "run-1") if e["event_type"] == "LLM_INVOCATION"]
    first = calls[0]["payload"]
    assert first["dropped_fields"] == ["eval_count"]
    assert first["tokens_out"] is None and first["tokens_in"] == 7
    assert first["retries"] == [], "a bad number is not a reason to ask again"
    assert all(c["payload"]["dropped_fields"] == [] for c in calls[1:])

    status = json.loads(cli_in_process(sqlite_backend, "status", "run-1", "--json").stdout)
    assert status["status"] == "completed" and status["cycles_completed"] == 2
    exported = cli_in_process(sqlite_backend, "export", "run-1", "--format", "csv")
    assert exported.returncode == 0, exported.stderr
    rows = list(csv.DictReader(io.StringIO(exported.stdout)))
    assert rows[0]["tokens_in"] == "7" and len(rows[0]["tokens_out"]) < 10
    shown = cli_in_process(sqlite_backend, "show", "run-1")
    assert shown.returncode == 0 and HUGE not in shown.stdout
