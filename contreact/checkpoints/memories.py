"""The agent's key-value memory as stored: one scope's keys, read and changed in a transaction.

The memory tools (`tools.memory`) decide what a call means and what the model is told; this
module is what they ask of storage. `Memory` is that ask, so a tool runs the same on any
persistence (`checkpoints.persistence`); `SqlMemory` answers it on the connection of the
journal transaction that records the call, so the change and its record commit together.
"""

from __future__ import annotations

from typing import Protocol

from sqlalchemy import delete, func, select
from typing_extensions import override

from contreact.checkpoints.schema import memories
from contreact.checkpoints.statements import Prepared, named, upsert
from contreact.checkpoints.transactions import Tx


class Memory(Protocol):
    """One scope's memories, inside the transaction of the call that uses them."""

    def value(self, key: str) -> str | None:
        """The value stored under `key` (None: nothing is)."""
        ...

    def put(self, key: str, value: str) -> None:
        """Store `value` under `key`, replacing what was there."""
        ...

    def delete(self, key: str) -> bool:
        """Delete `key`; whether it was there."""
        ...

    def keys(self) -> list[str]:
        """Every key, sorted."""
        ...

    def count(self) -> int:
        """How many keys there are."""
        ...

    def clear(self) -> int:
        """Delete every key; how many there were."""
        ...


_PARAMS = named(memories, "run_id", "key")
_RUN, _KEY = memories.c.run_id == _PARAMS["run_id"], memories.c.key == _PARAMS["key"]
_VALUE = Prepared(lambda _: select(memories.c.value).where(_RUN, _KEY))
_KEYS = Prepared(lambda _: select(memories.c.key).where(_RUN).order_by(memories.c.key))
_COUNT = Prepared(lambda _: select(func.count()).select_from(memories).where(_RUN))
_CLEAR = Prepared(lambda _: delete(memories).where(_RUN))
_DELETE = Prepared(lambda _: delete(memories).where(_RUN, _KEY))


class SqlMemory(Memory):
    """`Memory` in the `memories` table, on the caller's connection (its transaction)."""

    def __init__(self, conn: Tx, run_id: str) -> None:
        self.conn = conn
        self.run_id = run_id
        """The scope: the run id, or `RUN@LINEAGE` on a branch."""

    @override
    def value(self, key: str) -> str | None:
        row = _VALUE.first(self.conn, {"run_id": self.run_id, "key": key})
        return None if row is None else str(row[0])

    @override
    def put(self, key: str, value: str) -> None:
        row = {"run_id": self.run_id, "key": key, "value": value}
        upsert(self.conn, memories, row, ["run_id", "key"])

    @override
    def delete(self, key: str) -> bool:
        return bool(_DELETE.rowcount(self.conn, {"run_id": self.run_id, "key": key}))

    @override
    def keys(self) -> list[str]:
        return [str(k) for (k,) in _KEYS.rows(self.conn, {"run_id": self.run_id})]

    @override
    def count(self) -> int:
        return count_keys(self.conn, self.run_id)

    @override
    def clear(self) -> int:
        return clear_memory(self.conn, self.run_id)


def clear_memory(conn: Tx, run_id: str) -> int:
    """Delete every memory of a run (an intervention's wipe); how many there were."""
    return _CLEAR.rowcount(conn, {"run_id": run_id})


def count_keys(conn: Tx, run_id: str) -> int:
    """How many memories a run holds right now."""
    row = _COUNT.first(conn, {"run_id": run_id})
    return int(row[0]) if row else 0
