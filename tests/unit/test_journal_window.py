"""The journal's memory of a scope holds what a replay can need, not the whole run (issue 30).

A ledger answers "is this effect recorded?" from memory inside an invocation. It keeps the
keys of the latest two cycles and the run's fixed keys, so a run of 10,000 cycles costs the
driving process what a run of 10 does; a key outside that window is asked of the database,
so exactly-once holds for every key however old.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from contreact.checkpoints import journal as journal_module
from contreact.checkpoints import keys
from contreact.checkpoints.engines import engine_for
from contreact.checkpoints.journal import Ledger
from contreact.checkpoints.storage import Storage
from support.backends import Backend
from support.sql import Statements

KEYS_PER_CYCLE = 8


@pytest.fixture
def storage(tmp_path: Path) -> Storage:
    return Storage(f"sqlite:///{tmp_path / 'contreact.db'}", tmp_path)


def act(result: str) -> Any:
    return lambda _conn: (result, [])


def cycle_keys(cycle: int) -> list[str]:
    return [keys.model_call(cycle, step) for step in range(KEYS_PER_CYCLE - 1)] + [
        keys.cycle_end(cycle)
    ]


def drive(ledger: Ledger, cycles: range) -> None:
    for cycle in cycles:
        for key in cycle_keys(cycle):
            ledger.once(key, cycle, act(f"{key} done"))


def held(ledger: Ledger) -> int:
    return journal_module._known[(ledger.engine, ledger.run_id)].size()


def test_the_keys_held_do_not_grow_with_the_cycles(backend: Backend) -> None:
    storage = backend.storage()
    engine = engine_for(storage)
    ledger = Ledger(storage, "run-w", engine, invocation="inv-1")
    ledger.once(keys.RUN_START, 1, act("started"))
    drive(ledger, range(1, 11))
    after_ten = held(ledger)
    drive(ledger, range(11, 301))
    assert held(ledger) == after_ten <= 2 * KEYS_PER_CYCLE + len(keys.RUN_LEVEL)
    # A resume (a new invocation) loads the same few keys, not the run's 2,400.
    resumed = Ledger(storage, "run-w", engine, invocation="inv-2")
    assert resumed.recall(keys.model_call(301, 0)) is Ledger.MISSING
    assert held(resumed) == after_ten


def test_every_key_is_still_recorded_exactly_once(backend: Backend) -> None:
    storage = backend.storage()
    engine = engine_for(storage)
    ledger = Ledger(storage, "run-e", engine, invocation="inv-1")
    ledger.once(keys.RUN_START, 1, act("started"))
    drive(ledger, range(1, 51))
    again = Ledger(storage, "run-e", engine, invocation="inv-2")
    # An old cycle's key is asked of the database and replays its record...
    assert again.once(keys.model_call(3, 1), 3, act("twice")) == "c3:s1:llm done"
    # ...as do the latest cycle's and the run's fixed keys, from memory.
    assert again.once(keys.cycle_end(50), 50, act("twice")) == "c50:end done"
    assert again.once(keys.RUN_START, 51, act("twice")) == "started"


def test_new_keys_of_the_cycle_in_flight_cost_no_query(storage: Storage) -> None:
    engine = engine_for(storage)
    ledger = Ledger(storage, "run-q", engine, invocation="inv-1")
    drive(ledger, range(1, 101))
    resumed = Ledger(storage, "run-q", engine, invocation="inv-2")
    assert resumed.recall(keys.model_call(101, 0)) is Ledger.MISSING  # loads the window
    sql = Statements(engine)
    for step in range(1, 6):
        assert resumed.recall(keys.model_call(101, step)) is Ledger.MISSING
    assert resumed.recall(keys.EXTENSIONS) is Ledger.MISSING
    assert sql.count == 0
