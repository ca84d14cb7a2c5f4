"""A recorded answer never wedges a run: resume names a record it cannot replay, and skips it.

A model answer is journaled before its checkpoint; a process killed in between replays it
on resume. A record its step cannot use (written before a check existed, or damaged)
failed every resume the same way. Now plain `resume` fails with one line naming the
record and the way on, and `resume --skip-bad-record` records a RECORD_SKIPPED event and
takes an empty answer instead, which the parse node nudges: the run completes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update

from contreact.checkpoints.engines import engine_for
from contreact.checkpoints.schema import journal
from support.backends import Backend
from support.cli import cli, cli_in_process
from support.fuzz import HUGE
from support.runs import read_log, write_config
from support.stub import scripted_stub

KEY = "c2:s0:llm"
"""Cycle 2's first model call: journaled, then the process is killed before its checkpoint."""
SCRIPT = {2: [{"tool_calls": [{"name": "write", "arguments": {"key": "k", "value": "v"}}]}]}
"""Cycle 2 writes a memory first, so it has a tool result to journal."""


def _killed_after(key: str, tmp_path: Path, backend: Backend, url: str) -> None:
    config = write_config(tmp_path / "c.yaml", backend, cycles=3, ollama={"host": url})
    killed = cli(backend, "run", str(config), env={"CONTREACT_FAILPOINTS": f"after-commit:{key}"})
    assert killed.returncode == -9, killed.stderr


def _killed_after_the_answer_of_cycle_2(tmp_path: Path, backend: Backend, url: str) -> None:
    _killed_after(KEY, tmp_path, backend, url)


def _record(backend: Backend, key: str = KEY) -> Any:
    engine = engine_for(backend.storage())
    where = (journal.c.run_id == "run-1", journal.c.key == key)
    with engine.connect() as conn:
        (text,) = conn.execute(
            journal.select().with_only_columns(journal.c.result).where(*where)
        ).one()
    return json.loads(text)


def _rewrite_record(backend: Backend, change: Any, key: str = KEY) -> None:
    """Change the journaled result under `key`: merge a dict into it, or replace it."""
    record = {**_record(backend, key), **change} if isinstance(change, dict) else change
    where = (journal.c.run_id == "run-1", journal.c.key == key)
    with engine_for(backend.storage()).begin() as conn:
        conn.execute(update(journal).where(*where).values(result=json.dumps(record)))


def test_a_poisoned_record_is_named_by_resume_and_skipped_on_request(
    tmp_path: Path, sqlite_backend: Backend
) -> None:
    with scripted_stub({}) as server:
        _killed_after_the_answer_of_cycle_2(tmp_path, sqlite_backend, server.url)
        # An answer no message can be built from, every time it is replayed.
        _rewrite_record(sqlite_backend, {"content": {"not": "text"}, "tool_calls": 7})

        plain = cli(sqlite_backend, "resume", "run-1")
        assert plain.returncode == 1
        lines = plain.stderr.strip().splitlines()
        assert len(lines) == 1, plain.stderr
        assert f"record {KEY} cannot be replayed" in lines[0]
        assert "contreact resume run-1 --skip-bad-record" in lines[0]
        again = cli(sqlite_backend, "resume", "run-1")
        assert again.stderr == plain.stderr, "the same record, the same line, every time"

        skipped = cli(sqlite_backend, "resume", "run-1", "--skip-bad-record")
        assert skipped.returncode == 0 and skipped.stderr == "", skipped.stderr

    # The journal holds the stand-in now: a later replay of the step finds what it used.
    assert _record(sqlite_backend) == {"content": "", "tool_calls": [], "skipped_record": True}
    events = read_log(sqlite_backend, "run-1")
    skips = [e for e in events if e["event_type"] == "RECORD_SKIPPED"]
    assert len(skips) == 1 and skips[0]["cycle_number"] == 2
    assert skips[0]["payload"]["key"] == KEY
    assert skips[0]["payload"]["becomes"].startswith("an empty model answer")
    # The skipped step was an empty answer: the model was nudged and answered again.
    calls = [e["payload"]["step"] for e in events if e["event_type"] == "LLM_INVOCATION"]
    assert calls.count(1) >= 1
    status = json.loads(cli_in_process(sqlite_backend, "status", "run-1", "--json").stdout)
    assert status["status"] == "completed" and status["cycles_completed"] == 3


def test_an_old_record_holding_a_401_digit_count_replays_without_a_skip(
    tmp_path: Path, sqlite_backend: Backend
) -> None:
    """The journal form of issue 31's wedge: the count kept as its 401 digits, a string."""
    with scripted_stub({}) as server:
        _killed_after_the_answer_of_cycle_2(tmp_path, sqlite_backend, server.url)
        _rewrite_record(sqlite_backend, {"tokens_in": HUGE, "tokens_out": HUGE})
        resumed = cli(sqlite_backend, "resume", "run-1")
    assert resumed.returncode == 0 and resumed.stderr == "", resumed.stderr
    assert not [e for e in read_log(sqlite_backend, "run-1") if e["event_type"] == "RECORD_SKIPPED"]
    shown = cli_in_process(sqlite_backend, "export", "run-1", "--format", "csv")
    assert shown.returncode == 0 and HUGE not in shown.stdout


@pytest.mark.parametrize(
    ("key", "poison", "becomes"),
    [
        ("c2:s0:t0", ["not", "a", "result"], "a failed tool call"),
        ("c2:end", {"advisory": 5}, "a cycle close without a similarity advisory"),
    ],
    ids=["tool result", "cycle close"],
)
def test_every_journaled_step_names_a_record_it_cannot_replay_and_can_skip_it(
    tmp_path: Path, sqlite_backend: Backend, key: str, poison: Any, becomes: str
) -> None:
    with scripted_stub(SCRIPT) as server:
        _killed_after(key, tmp_path, sqlite_backend, server.url)
        _rewrite_record(sqlite_backend, poison, key)
        plain = cli_in_process(sqlite_backend, "resume", "run-1")
        assert plain.returncode == 1 and len(plain.stderr.strip().splitlines()) == 1
        assert f"record {key} cannot be replayed" in plain.stderr, plain.stderr
        skipped = cli_in_process(sqlite_backend, "resume", "run-1", "--skip-bad-record")
        assert skipped.returncode == 0, skipped.stderr
    skips = [e for e in read_log(sqlite_backend, "run-1") if e["event_type"] == "RECORD_SKIPPED"]
    assert [(s["payload"]["key"], s["payload"]["becomes"][: len(becomes)]) for s in skips] == [
        (key, becomes)
    ]
    status = json.loads(cli_in_process(sqlite_backend, "status", "run-1", "--json").stdout)
    assert status["status"] == "completed" and status["cycles_completed"] == 3
