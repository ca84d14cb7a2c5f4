"""The front door's contract in dicts: the nodes' unit tests run a whole cycle without a database.

It keeps the promises the nodes rely on, not the database's performance: an act runs once
per key and a replay returns its recorded result as the database would (decoded from the
JSON it was stored as); an act's changes (memory, the cycle, its similarity keys) and its
record and events are applied together when it returns, and not at all when it raises;
events are idempotent by key and stored as the event store's rows. Each scope is one run:
a step never starts a branch here (`enter_step` keeps the state's lineage), and a ledger
hands over every note of its scope (a test's run is short).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from typing_extensions import override

from contreact.checkpoints.cycles import CycleRecord, Note, NoteTail
from contreact.checkpoints.event_schema import Event
from contreact.checkpoints.event_store import as_line, event_row, seconds_from
from contreact.checkpoints.fork import ForkPoint
from contreact.checkpoints.journal import used_record
from contreact.checkpoints.memories import Memory
from contreact.checkpoints.persistence.contract import Act, Ledger, Persistence, Unit

T = TypeVar("T")
U = TypeVar("U")

_MISSING = object()


class DictMemory(Memory):
    """`Memory` over a dict: one scope's memories, as an act sees them."""

    def __init__(self, values: dict[str, str]) -> None:
        self.values = values

    @override
    def value(self, key: str) -> str | None:
        return self.values.get(key)

    @override
    def put(self, key: str, value: str) -> None:
        self.values[key] = value

    @override
    def delete(self, key: str) -> bool:
        return self.values.pop(key, None) is not None

    @override
    def keys(self) -> list[str]:
        return sorted(self.values)

    @override
    def count(self) -> int:
        return len(self.values)

    @override
    def clear(self) -> int:
        count = len(self.values)
        self.values.clear()
        return count


def _note(record: CycleRecord) -> Note:
    return Note(record.cycle, record.opening, record.reflection)


class MemoryUnit(Unit):
    """An act's storage: a copy of its scope's memory and what it adds, applied if it returns."""

    def __init__(self, store: MemoryPersistence, scope: str) -> None:
        self._store = store
        self._scope = scope
        self.memory = DictMemory(dict(store.memories.get(scope, {})))
        self._cycles: dict[int, CycleRecord] = {}
        self._keys: list[tuple[int, int]] = []
        self._completed: list[str] = []

    @override
    def seconds_since(self, key: str) -> float | None:
        row = self._store.events.get(self._scope, {}).get(key)
        return None if row is None else seconds_from(str(row["timestamp"]))

    @override
    def similar_notes(self, keys: Sequence[int], *, before: int, per_key: int) -> list[Note]:
        if not keys or per_key <= 0:
            return []
        index = self._store.similarity.get(self._scope, {})
        found: set[int] = set()
        for key in keys:
            earlier = sorted((c for c in index.get(key, ()) if c < before), reverse=True)
            found.update(earlier[:per_key])
        cycles = self._store.cycles.get(self._scope, {})
        return [_note(cycles[c]) for c in sorted(found) if c in cycles]

    @override
    def index_keys(self, cycle: int, keys: Sequence[int]) -> None:
        self._keys.extend((key, cycle) for key in dict.fromkeys(keys))

    @override
    def insert_cycle(self, record: CycleRecord) -> bool:
        if record.cycle in self._store.cycles.get(self._scope, {}) or record.cycle in self._cycles:
            return False
        # Stored as the database stores it: the metrics and flags as JSON, read back.
        metrics = json.loads(json.dumps(record.metrics, ensure_ascii=False))
        self._cycles[record.cycle] = replace(record, metrics=metrics, flags=list(record.flags))
        return True

    @override
    def complete_studio_run(self, run_id: str) -> None:
        self._completed.append(run_id)

    def apply(self) -> None:
        """Make the act's changes the store's (under the store's lock)."""
        store, scope = self._store, self._scope
        store.memories[scope] = self.memory.values
        for cycle, record in self._cycles.items():
            store.cycles.setdefault(scope, {}).setdefault(cycle, record)
        for key, cycle in self._keys:
            store.similarity.setdefault(scope, {}).setdefault(key, set()).add(cycle)
        store.completed.update(self._completed)


class MemoryLedger(Ledger):
    """One scope's journal and events in a `MemoryPersistence`."""

    def __init__(self, store: MemoryPersistence, scope: str) -> None:
        self._store = store
        self._scope = scope

    @override
    @property
    def run_id(self) -> str:
        return self._scope

    def recall(self, key: str) -> Any:
        """The recorded result of `key`, decoded as the database's would be, or `_MISSING`."""
        found = self._store.records.get(self._scope, {}).get(key)
        return _MISSING if found is None else json.loads(found[1])

    @override
    def once(
        self,
        key: str,
        cycle: int,
        act: Act[T],
        *,
        replayed: Callable[[T], None] | None = None,
    ) -> T:
        found = self.recall(key)
        if found is _MISSING:
            return self.commit(key, cycle, act)
        if replayed is not None:
            replayed(found)
        return found  # type: ignore[no-any-return]

    @override
    def commit(self, key: str, cycle: int, act: Act[T]) -> T:
        unit = MemoryUnit(self._store, self._scope)
        result, batch = act(unit)
        text = json.dumps(result, ensure_ascii=False, default=str)
        with self._store.lock:
            unit.apply()
            self._store.records.setdefault(self._scope, {}).setdefault(key, (cycle, text))
            self._store.add_events(self._scope, batch)
        return result

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
        return used_record(key, cycle, result, use, stand_in, becomes, self.replace)

    def replace(self, key: str, cycle: int, result: Any, event: Event) -> None:
        """Record `result` under `key` in place of what is there, with `event`."""
        text = json.dumps(result, ensure_ascii=False, default=str)
        with self._store.lock:
            self._store.records.setdefault(self._scope, {})[key] = (cycle, text)
            self._store.add_events(self._scope, [event])

    @override
    def emit(self, *batch: Event) -> None:
        with self._store.lock:
            self._store.add_events(self._scope, batch)

    @override
    def count_events(self, *, key_prefix: str, cycle: int) -> int:
        rows = self._store.events.get(self._scope, {})
        return sum(
            1 for k, row in rows.items() if k.startswith(key_prefix) and row["cycle"] == cycle
        )

    @override
    def recent_notes(
        self, *, before: int, chars: int = 0, count: int = 0, since: int | None = None
    ) -> NoteTail:
        cycles = self._store.cycles.get(self._scope, {})
        return NoteTail(0, tuple(_note(cycles[c]) for c in sorted(cycles) if c < before))


class MemoryPersistence(Persistence):
    """A whole store in dicts: journal records, events, memories, cycles, similarity keys."""

    def __init__(self) -> None:
        self.records: dict[str, dict[str, tuple[int, str]]] = {}
        """Scope -> key -> (cycle, the result as JSON)."""
        self.events: dict[str, dict[str, dict[str, Any]]] = {}
        """Scope -> key -> the event's row (`event_store.event_row`), in the order stored."""
        self.memories: dict[str, dict[str, str]] = {}
        self.cycles: dict[str, dict[int, CycleRecord]] = {}
        self.similarity: dict[str, dict[int, set[int]]] = {}
        """Scope -> similarity key -> the cycles indexed under it."""
        self.completed: set[str] = set()
        """Runs begun in Studio and completed."""
        self.lock = threading.Lock()

    def add_events(self, scope: str, batch: Sequence[Event]) -> None:
        """Store the events of `batch` not stored yet (by key), as the event store would."""
        rows = self.events.setdefault(scope, {})
        for ev in batch:
            if ev.key not in rows:
                rows[ev.key] = event_row(scope, ev)

    def event_lines(self, scope: str) -> list[dict[str, Any]]:
        """A scope's events in the order stored, shaped as `event_store.read_events` gives them."""
        return [as_line(scope, row) for row in self.events.get(scope, {}).values()]

    @override
    def ledger(self, scope: str, invocation: str | None = None) -> MemoryLedger:
        return MemoryLedger(self, scope)

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
        return lineage
