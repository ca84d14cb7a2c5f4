"""The journal's look-up: answered from memory inside an invocation, never stale across them.

The look-up before every side effect used to be a database query; now each invocation
loads the scope's latest keys once (`test_journal_window` bounds them), and a key another
process recorded since is seen by the next invocation (a Studio server replaying a step a
CLI resume recorded).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from contreact.checkpoints import keys
from contreact.checkpoints.engines import engine_for
from contreact.checkpoints.journal import Ledger
from contreact.checkpoints.schema import journal
from contreact.checkpoints.statements import insert_ignore
from contreact.checkpoints.storage import Storage
from support.sql import Statements, trace_sql


@pytest.fixture
def storage(tmp_path: Path) -> Storage:
    return Storage(f"sqlite:///{tmp_path / 'contreact.db'}", tmp_path)


def record_elsewhere(engine: Engine, scope: str, key: str, result: str) -> None:
    """What another process's ledger writes (bypassing this process's memory)."""
    with engine.begin() as conn:
        insert_ignore(
            conn, journal, {"run_id": scope, "key": key, "cycle": 1, "result": f'"{result}"'}
        )


def act(result: str) -> Any:
    return lambda _conn: (result, [])


def test_absent_keys_cost_no_query_within_an_invocation(storage: Storage) -> None:
    engine = engine_for(storage)
    ledger = Ledger(storage, "run-q", engine, invocation="inv-1")
    assert ledger.recall(keys.model_call(1, 0)) is Ledger.MISSING  # loads the scope once
    sql = Statements(engine)
    for step in range(1, 6):
        assert ledger.recall(keys.model_call(1, step)) is Ledger.MISSING
    assert sql.count == 0
    # What this process records is known at once; replaying it reads its result.
    assert ledger.once(keys.model_call(1, 1), 1, act("first")) == "first"
    again = Ledger(storage, "run-q", engine, invocation="inv-1")
    assert again.once(keys.model_call(1, 1), 1, act("second")) == "first"


def test_a_key_recorded_by_another_process_is_seen_by_the_next_invocation(
    storage: Storage,
) -> None:
    engine = engine_for(storage)
    first = Ledger(storage, "run-x", engine, invocation="inv-1")
    assert first.recall(keys.model_call(2, 0)) is Ledger.MISSING
    record_elsewhere(engine, "run-x", keys.model_call(2, 0), "theirs")
    later = Ledger(storage, "run-x", engine, invocation="inv-2")
    assert later.once(keys.model_call(2, 0), 2, act("mine")) == "theirs"


def test_without_an_invocation_every_look_up_asks_the_database(storage: Storage) -> None:
    engine = engine_for(storage)
    ledger = Ledger(storage, "run-n", engine)
    assert ledger.recall("k") is Ledger.MISSING
    record_elsewhere(engine, "run-n", "k", "theirs")
    assert ledger.recall("k") == "theirs"


def test_a_run_looks_up_no_result_it_did_not_record(storage: Storage) -> None:
    """Driven by the runner, a fresh run's journal look-ups are all answered from memory."""
    from contreact.config import parse_config
    from contreact.engine.runner import start_run
    from contreact.stub import StubServer

    engine = engine_for(storage)
    looked_up: list[str] = []

    def seen(statement: str) -> None:
        if "contreact_journal.result" in statement:
            looked_up.append(statement)

    trace_sql(engine, seen)
    with StubServer().start() as server:
        config = parse_config(
            {"run_id": "fresh", "model": "stub-model", "cycles": 3, "ollama": {"host": server.url}},
            "test",
        )
        outcome = start_run(config, storage)
        requests = len(server.requests())
    assert outcome.status == "completed" and requests >= 3, outcome.reason
    assert looked_up == []
