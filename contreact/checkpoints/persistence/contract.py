"""The contract of the front door: what a node step may ask of storage, and nothing more.

Three protocols. `Persistence` is a run's storage (it gives a scope's `Ledger` and says
which lineage a step runs in); `Ledger` is one scope's exactly-once journal, its events and
the reads a step makes; `Unit` is what a journaled act may change, inside the transaction
that records it. Each implementation (`sql`, `memory`) subclasses them, so the type checker
holds it to every signature here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

from contreact.checkpoints.cycles import CycleRecord, Note, NoteTail
from contreact.checkpoints.event_schema import Event
from contreact.checkpoints.fork import ForkPoint
from contreact.checkpoints.memories import Memory

T = TypeVar("T")
U = TypeVar("U")


class Unit(Protocol):
    """What a journaled act may do to storage, inside the transaction that records it."""

    memory: Memory
    """The scope's memories (the memory tools' storage)."""

    def seconds_since(self, key: str) -> float | None:
        """Seconds since the scope's event `key` was logged (None: it was not)."""
        ...

    def similar_notes(self, keys: Sequence[int], *, before: int, per_key: int) -> list[Note]:
        """Notes of cycles below `before` indexed under any of `keys` (newest `per_key` each)."""
        ...

    def index_keys(self, cycle: int, keys: Sequence[int]) -> None:
        """Index `cycle`'s reflection under the similarity `keys` (idempotent)."""
        ...

    def insert_cycle(self, record: CycleRecord) -> bool:
        """Store a finished cycle (idempotent); True when new."""
        ...

    def complete_studio_run(self, run_id: str) -> None:
        """Mark the run `run_id` completed if it was begun in Studio."""
        ...


Act = Callable[[Unit], tuple[T, Sequence[Event]]]
"""A side effect: performs it through the unit; returns its JSON-able result and its events."""


class Ledger(Protocol):
    """One scope's exactly-once side effects and events, and the reads a step makes."""

    @property
    def run_id(self) -> str:
        """The scope: the run id on a run's main line, `RUN@LINEAGE` on a branch."""
        ...

    def once(
        self,
        key: str,
        cycle: int,
        act: Act[T],
        *,
        replayed: Callable[[T], None] | None = None,
    ) -> T:
        """The side effect `key`, exactly once: its recorded result, or `act`'s, recorded.

        `act` runs only when nothing is recorded under `key`; if it raises, nothing it did
        and no record remain. `replayed` is called with the recorded result when `act`
        did not run.
        """
        ...

    def commit(self, key: str, cycle: int, act: Act[T]) -> T:
        """Journal `act`'s result under `key` with its events (after `once` found nothing)."""
        ...

    def used(
        self,
        key: str,
        cycle: int,
        result: T,
        use: Callable[[T], U],
        stand_in: Callable[[], T],
        becomes: str,
    ) -> U:
        """`use(result)` of the journaled `key`; a result it cannot use is a bad record.

        That is `journal.BadRecordError`, or `stand_in` journaled in its place under
        `resume --skip-bad-record`.
        """
        ...

    def emit(self, *batch: Event) -> None:
        """Record events that are not tied to a journaled result (idempotent by key)."""
        ...

    def count_events(self, *, key_prefix: str, cycle: int) -> int:
        """How many of the scope's events of `cycle` have keys starting with `key_prefix`."""
        ...

    def recent_notes(
        self, *, before: int, chars: int = 0, count: int = 0, since: int | None = None
    ) -> NoteTail:
        """The newest notes of the scope's finished cycles below `before`, oldest first.

        At least `count` notes and `chars` characters of reflections (reaching back to
        cycle `since`, if given), or every note there is; older ones are only counted.
        """
        ...


class Persistence(Protocol):
    """A run's storage, as the nodes see it."""

    def ledger(self, scope: str, invocation: str | None = None) -> Ledger:
        """The ledger of `scope`.

        `invocation` (LangGraph's run id of one `invoke`/`stream` call) lets the steps of
        that call share what they know of the recorded keys.
        """
        ...

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
        """What every node step does first: the lineage it runs in (`checkpointing.enter_step`)."""
        ...
