"""The memory tools on each backend, run the way dispatch runs them: in a journal transaction.

Their statements run on the raw DBAPI cursor (`checkpoints.statements.Prepared`), where each
driver's own conventions apply (parameter style, `rowcount`, `RETURNING`); these cases
tell a right answer from a plausible wrong one on SQLite and on PostgreSQL alike.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from contreact.checkpoints.engines import engine_for
from contreact.checkpoints.memories import count_keys
from contreact.checkpoints.persistence import Ledger, Unit, sql_persistence
from contreact.tools.memory import (
    ToolError,
    ToolSession,
    delete_memory,
    list_memories,
    read_memory,
    search_memory_keys,
    write_memory,
)
from support.backends import Backend


def test_memory_tools_in_journal_transactions(backend: Backend) -> None:
    storage = backend.storage()
    ledger = sql_persistence(storage).ledger("mem-run")
    other = sql_persistence(storage).ledger("other-run")

    def run(ledger: Ledger, key: str, tool: Callable[[ToolSession], str]) -> str:
        def act(unit: Unit) -> tuple[str, list[object]]:
            session = ToolSession(run_id=ledger.run_id, memory=unit.memory)
            try:
                return tool(session), []
            except ToolError as exc:
                return f"Error: {exc}", []

        return ledger.once(key, 1, act)  # type: ignore[arg-type]

    assert run(ledger, "1", lambda s: write_memory(s, "b%_'key", "first")).startswith("Created")
    assert run(ledger, "2", lambda s: write_memory(s, "b%_'key", "second")).startswith("Updated")
    assert run(ledger, "3", lambda s: write_memory(s, "a", "ä 🙂")).startswith("Created")
    assert run(other, "1", lambda s: write_memory(s, "a", "not mine")).startswith("Created")
    assert run(ledger, "4", lambda s: read_memory(s, "b%_'key")) == "second"
    assert run(ledger, "5", lambda s: read_memory(s, "a")) == "ä 🙂"
    assert run(ledger, "6", list_memories) == "2 memories: a, b%_'key"
    assert run(ledger, "7", lambda s: search_memory_keys(s, "%_")) == "1 keys contain '%_': b%_'key"
    assert run(ledger, "8", lambda s: delete_memory(s, "a")) == "Deleted memory 'a'."
    assert run(ledger, "9", lambda s: delete_memory(s, "a")).startswith("Error: no memory")
    assert run(ledger, "10", lambda s: read_memory(s, "a")).startswith("Error: no memory")
    with engine_for(storage).connect() as conn:
        assert count_keys(conn, "mem-run") == 1
        assert count_keys(conn, "other-run") == 1
        assert count_keys(conn, "nobody") == 0
    # A replayed step returns its recorded result and does not act again.
    assert run(ledger, "8", lambda s: delete_memory(s, "b%_'key")) == "Deleted memory 'a'."
    assert run(ledger, "11", lambda s: read_memory(s, "b%_'key")) == "second"


def test_a_failed_step_leaves_no_memory_change(backend: Backend) -> None:
    storage = backend.storage()
    ledger = sql_persistence(storage).ledger("atomic")

    def act(unit: Unit) -> tuple[str, list[object]]:
        write_memory(ToolSession(run_id="atomic", memory=unit.memory), "k", "v")
        raise RuntimeError("the process dies before the record commits")

    with pytest.raises(RuntimeError):
        ledger.once("1", 1, act)  # type: ignore[arg-type]
    with engine_for(storage).connect() as conn:
        assert count_keys(conn, "atomic") == 0
