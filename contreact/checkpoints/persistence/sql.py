"""The front door's contract on the run's database: each call delegates to `checkpoints`.

Nothing is stored differently for passing through here: a ledger is `journal.Ledger` (its
transactions, statements and exactly-once guarantee), an act's unit is the journal
transaction's connection handed to the same functions the nodes called before
(`cycles`, `similarity_index`, `memories`, `registry`, `event_store`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from typing_extensions import override

from contreact.checkpoints import cycles, event_store, journal, registry, similarity_index
from contreact.checkpoints.cycles import CycleRecord, Note, NoteTail
from contreact.checkpoints.engines import engine_for
from contreact.checkpoints.event_schema import Event
from contreact.checkpoints.fork import ForkPoint
from contreact.checkpoints.memories import SqlMemory
from contreact.checkpoints.persistence.checkpointing import enter_step
from contreact.checkpoints.persistence.contract import Act, Ledger, Persistence, Unit
from contreact.checkpoints.storage import Storage
from contreact.checkpoints.transactions import Tx
from contreact.text.similarity import INDEX_BANDS

T = TypeVar("T")
U = TypeVar("U")

# Made now, not at a long run's first look-up: a resident process compiles every statement
# made before it forks its commands (`statements.compile_all`).
similarity_index.lookup(INDEX_BANDS)


class SqlUnit(Unit):
    """An act's storage: the journal transaction's connection, in the ledger's scope."""

    def __init__(self, conn: Tx, scope: str) -> None:
        self.conn = conn
        self.scope = scope
        self.memory = SqlMemory(conn, scope)

    @override
    def seconds_since(self, key: str) -> float | None:
        return event_store.seconds_since(self.conn, self.scope, key)

    @override
    def similar_notes(self, keys: Sequence[int], *, before: int, per_key: int) -> list[Note]:
        return similarity_index.similar_notes(
            self.conn, self.scope, keys, before=before, per_key=per_key
        )

    @override
    def index_keys(self, cycle: int, keys: Sequence[int]) -> None:
        similarity_index.insert_keys(self.conn, self.scope, cycle, keys)

    @override
    def insert_cycle(self, record: CycleRecord) -> bool:
        return cycles.insert_cycle(self.conn, self.scope, record)

    @override
    def complete_studio_run(self, run_id: str) -> None:
        registry.complete_studio_run(self.conn, run_id)


class SqlLedger(Ledger):
    """A scope's `journal.Ledger`, its acts handed a `SqlUnit` of its transaction."""

    def __init__(self, ledger: journal.Ledger) -> None:
        self.journal = ledger

    @override
    @property
    def run_id(self) -> str:
        return self.journal.run_id

    def _on_conn(self, act: Act[T]) -> Callable[[Tx], tuple[T, Sequence[Event]]]:
        scope = self.journal.run_id
        return lambda conn: act(SqlUnit(conn, scope))

    @override
    def once(
        self,
        key: str,
        cycle: int,
        act: Act[T],
        *,
        replayed: Callable[[T], None] | None = None,
    ) -> T:
        return self.journal.once(key, cycle, self._on_conn(act), replayed=replayed)

    @override
    def commit(self, key: str, cycle: int, act: Act[T]) -> T:
        return self.journal.commit(key, cycle, self._on_conn(act))

    @override
    def used(
        self,
        key: str,
        cycle: int,
        result: T,
        use: Callable[[T], U],
        stand_in: Callable[[], T],
        becomes: str,
    ) -> U:
        return self.journal.used(key, cycle, result, use, stand_in, becomes)

    @override
    def emit(self, *batch: Event) -> None:
        self.journal.emit(*batch)

    @override
    def count_events(self, *, key_prefix: str, cycle: int) -> int:
        return event_store.count_events(
            self.journal.engine, self.journal.run_id, key_prefix=key_prefix, cycle=cycle
        )

    @override
    def recent_notes(
        self, *, before: int, chars: int = 0, count: int = 0, since: int | None = None
    ) -> NoteTail:
        return cycles.recent_notes(
            self.journal.engine,
            self.journal.run_id,
            before=before,
            chars=chars,
            count=count,
            since=since,
        )


class SqlPersistence(Persistence):
    """A run's storage (`Storage`: its database and data folder) behind the front door."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage

    @override
    def ledger(self, scope: str, invocation: str | None = None) -> SqlLedger:
        engine = engine_for(self.storage)
        return SqlLedger(journal.Ledger(self.storage, scope, engine, invocation=invocation))

    @override
    def enter_step(
        self,
        *,
        run_id: str,
        lineage: str,
        thread_id: str | None,
        checkpoint_id: str,
        invocation: str | None,
        fork_point: Callable[[], ForkPoint],
        model: str,
        register: Callable[[], dict[str, Any]],
    ) -> str:
        return enter_step(
            self.storage,
            run_id=run_id,
            lineage=lineage,
            thread_id=thread_id,
            checkpoint_id=checkpoint_id,
            invocation=invocation,
            fork_point=fork_point,
            model=model,
            register=register,
        )
