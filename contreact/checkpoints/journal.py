"""The side-effect journal: what makes a node that re-runs after a crash exactly-once.

A node's side effects (a model call, a tool run, an operator reply, a cycle's close)
happen before the checkpoint that records the node's output. If the process dies in
between, LangGraph runs the node again on resume. Each effect therefore goes through
`Ledger.once` under a key from `checkpoints.keys` (checkpointed counters) in the ledger's
scope (run id and lineage, `checkpoints.lineage`): its result is journaled in the same
transaction as its events (and, for memory tools, as the memory change itself), and a
re-run returns the recorded result instead of acting twice. A branch has its own scope,
so it acts afresh.

The look-up before every effect is answered from memory: a ledger that knows which
invocation it serves (`invocation`, LangGraph's run id of one `invoke`/`stream` call)
shares what it knows of its scope's recorded keys with the other steps of that
invocation. Inside one invocation only this process drives the thread (the registry
refuses a second driver), so what it records itself is all that can change; the next
invocation reloads. Only a key found costs a query (its result), and that happens only
when a step is replayed.

What is kept is bounded by what a replay can need, not by the run's length: the keys of
the latest two cycles (a crash replays at most the cycle in flight, whose checkpoint is
the previous cycle's close) and the run's fixed keys (`keys.RUN_LEVEL`), read through the
(run, cycle) index and the primary key. A key outside that window (an older cycle's, a
numbered run-level one such as a resume's provenance) is looked up in the database: rare,
and always right.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from functools import cache
from typing import Any, TypeVar, cast

from sqlalchemy import Engine, bindparam, func, select

from contreact.checkpoints import keys
from contreact.checkpoints.engines import engine_for
from contreact.checkpoints.event_mirror import mirror_lines
from contreact.checkpoints.event_schema import Event, RecordSkipped
from contreact.checkpoints.event_store import event_row, insert_events, line_text
from contreact.checkpoints.failpoints import failpoint
from contreact.checkpoints.schema import events, journal
from contreact.checkpoints.statements import Prepared, insert_ignore, named, upsert
from contreact.checkpoints.storage import Storage
from contreact.checkpoints.transactions import Tx, autocommit, reading, transaction

T = TypeVar("T")
U = TypeVar("U")

REASON_CHARS = 160
"""How much of a replay failure's reason its one line quotes."""

skip_bad_records: ContextVar[bool] = ContextVar("contreact_skip_bad_records", default=False)
"""Set while `contreact resume RUN --skip-bad-record` drives a run: a journaled result that
cannot be used is replaced by its step's stand-in, and the skip recorded as an event."""


class BadRecordError(Exception):
    """A journaled result its step cannot use: replaying it fails the same way every time.

    Journaled results are replayed on resume, so one that breaks its step (a record from
    before a check existed, a damaged row) would fail every resume: the run would be
    wedged. This names the record; the runner adds the way on.
    """

    def __init__(self, key: str, reason: str) -> None:
        self.key, self.reason = key, reason
        super().__init__(f"the journaled record {key} cannot be replayed ({reason})")


def _reason(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    text = lines[0] if lines else type(exc).__name__
    return text if len(text) <= REASON_CHARS else text[: REASON_CHARS - 1] + "…"


_PARAMS = named(journal, "run_id", "key")
_RUN, _KEY = journal.c.run_id == _PARAMS["run_id"], journal.c.key == _PARAMS["key"]
_RECALL = Prepared(lambda _: select(journal.c.result).where(_RUN, _KEY))
_WINDOW = 2
"""Cycles whose keys a scope's memory holds: the latest recorded one and the one before."""
_RUN_LEVEL = {f"fixed_{i}": key for i, key in enumerate(keys.RUN_LEVEL)}
_LATEST = Prepared(lambda _: select(func.max(journal.c.cycle)).where(_RUN))
_FLOOR = bindparam("floor", type_=journal.c.cycle.type)
_LOAD = Prepared(
    lambda _: (
        select(journal.c.key)
        .where(_RUN, journal.c.cycle >= _FLOOR)
        .union_all(
            select(journal.c.key).where(
                _RUN, journal.c.key.in_([bindparam(name) for name in _RUN_LEVEL])
            )
        )
    )
)

_MISSING: Any = object()


class _Recorded:
    """The keys recorded in one scope that a replay can ask for, as this process knows them.

    Complete for every cycle from `floor` on and for the run-level keys: a key there that
    is not in the set is not recorded. Older cycles are forgotten as new ones are
    recorded, so the memory stays the size of two cycles however long the run.
    """

    def __init__(self) -> None:
        self.by_cycle: dict[int, set[str]] = {}
        self.run_level: set[str] = set()
        self.floor = 0
        """The oldest cycle whose keys are all here."""
        self.invocation: str | None = None
        """The invocation that last loaded the set from the database."""
        self.lock = threading.Lock()

    def load(self, floor: int, found: Sequence[str]) -> None:
        """Replace what is known by `found`: the run-level keys and every key from `floor` on."""
        with self.lock:
            self.by_cycle, self.run_level, self.floor = {}, set(), floor
            for key in found:
                self._add(key)

    def knows(self, key: str) -> bool | None:
        """Whether `key` is recorded; None when it lies outside what is kept (ask the database)."""
        if key in keys.RUN_LEVEL:
            return key in self.run_level
        cycle = keys.cycle_of(key)
        with self.lock:  # the floor and the cycles it keeps move together
            if cycle is None or cycle < self.floor:
                return None
            return key in self.by_cycle.get(cycle, ())

    def add(self, key: str) -> None:
        """A key this process just recorded."""
        with self.lock:
            self._add(key)

    def size(self) -> int:
        """How many keys are held (for tests: it must not grow with the run)."""
        return len(self.run_level) + sum(len(k) for k in self.by_cycle.values())

    def _add(self, key: str) -> None:
        if key in keys.RUN_LEVEL:
            self.run_level.add(key)
            return
        cycle = keys.cycle_of(key)
        if cycle is None or cycle < self.floor:
            return
        self.by_cycle.setdefault(cycle, set()).add(key)
        # Every cycle from the old floor on is complete, so the window may move up.
        if cycle - _WINDOW + 1 > self.floor:
            self.floor = cycle - _WINDOW + 1
            for old in [c for c in self.by_cycle if c < self.floor]:
                del self.by_cycle[old]


_known: OrderedDict[tuple[Engine, str], _Recorded] = OrderedDict()
_known_lock = threading.Lock()
_KNOWN_SCOPES = 256


class Ledger:
    """Exactly-once side effects and events for one scope (a run, or a branch of one)."""

    def __init__(
        self,
        storage: Storage,
        run_id: str,
        engine: Engine | None = None,
        invocation: str | None = None,
    ) -> None:
        self.storage = storage
        self.run_id = run_id
        """The scope: the run id on a run's main line, `RUN@LINEAGE` on a branch."""
        self.engine = engine or engine_for(storage)
        self.invocation = invocation
        """The graph invocation this ledger serves; None: look every key up in the database."""

    def _recorded(self) -> _Recorded | None:
        """What this process knows of the scope's keys, loaded once per invocation."""
        if self.invocation is None:
            return None
        with _known_lock:
            known = _known.setdefault((self.engine, self.run_id), _Recorded())
            _known.move_to_end((self.engine, self.run_id))
            while len(_known) > _KNOWN_SCOPES:
                _known.popitem(last=False)
        if known.invocation != self.invocation:
            params: dict[str, Any] = {"run_id": self.run_id, **_RUN_LEVEL}
            with reading(self.engine) as conn:
                latest = _LATEST.first(conn, params)
                params["floor"] = floor = max(0, int((latest or (None,))[0] or 0) - _WINDOW + 1)
                known.load(floor, [str(k) for (k,) in _LOAD.rows(conn, params)])
            known.invocation = self.invocation
        return known

    def recall(self, key: str) -> Any:
        """The journaled result for `key`, or `Ledger.MISSING`."""
        known = self._recorded()
        if known is not None and known.knows(key) is False:
            return _MISSING
        with reading(self.engine) as conn:
            row = _RECALL.first(conn, {"run_id": self.run_id, "key": key})
        return _MISSING if row is None else json.loads(row[0])

    MISSING = _MISSING

    def commit(
        self,
        key: str,
        cycle: int,
        act: Callable[[Tx], tuple[T, Sequence[Event]]],
    ) -> T:
        """Journal the result of `act` under `key`, with its events, in one transaction.

        `act` runs inside the transaction, so an effect on the same database (a memory
        write) commits atomically with its record. Call after `recall` found nothing.
        The result must be JSON-serializable.
        """
        with transaction(self.engine) as conn:
            result, batch = act(conn)
            failpoint(f"before-commit:{key}")
            record = {
                "run_id": self.run_id,
                "key": key,
                "cycle": cycle,
                "result": json.dumps(result, ensure_ascii=False, default=str),
            }
            lines = write_record(conn, self.run_id, record, batch)
        with _known_lock:
            known = _known.get((self.engine, self.run_id))
        if known is not None:  # whichever ledger recorded it, the set must include it
            known.add(key)
        failpoint(f"after-commit:{key}")
        mirror_lines(self.engine, self.storage, self.run_id, lines)
        failpoint(f"after-append:{key}")
        return result

    def once(
        self,
        key: str,
        cycle: int,
        act: Callable[[Tx], tuple[T, Sequence[Event]]],
        *,
        replayed: Callable[[T], None] | None = None,
    ) -> T:
        """The side effect `key`, exactly once: its recorded result, or `act`'s, recorded.

        Args:
            key: From `checkpoints.keys`.
            cycle: The cycle the effect belongs to.
            act: Performs the effect on the transaction's connection; returns its
                (JSON-serializable) result and its events. It runs only when nothing is
                recorded under `key`; if it raises, nothing is recorded.
            replayed: Called with the recorded result when `act` did not run.
        """
        found = self.recall(key)
        if found is _MISSING:
            return self.commit(key, cycle, act)
        if replayed is not None:
            replayed(found)
        return cast(T, found)

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

        Args:
            key: The record's key.
            cycle: Its cycle.
            result: The result `once` returned (journaled, whether new or replayed).
            use: What the step makes of it: a pure function, so a failure repeats on
                every replay.
            stand_in: The result the step takes instead when the record is skipped.
            becomes: What the skipped step becomes, in words, for the skip's event.

        Raises:
            BadRecordError: `use` failed and skipping is not asked for (`skip_bad_records`).
        """
        return used_record(key, cycle, result, use, stand_in, becomes, self.replace)

    def replace(self, key: str, cycle: int, result: Any, event: Event) -> None:
        """Journal `result` under `key` in place of what is there, with `event`, at once."""
        text = json.dumps(result, ensure_ascii=False, default=str)
        with transaction(self.engine) as conn:
            row = {"run_id": self.run_id, "key": key, "cycle": cycle, "result": text}
            upsert(conn, journal, row, ["run_id", "key"])
            lines = write_record(conn, self.run_id, None, [event])
        mirror_lines(self.engine, self.storage, self.run_id, lines)

    def emit(self, *batch: Event) -> None:
        """Record events that are not tied to a journaled result (idempotent by key)."""
        with transaction(self.engine) as conn:
            lines = write_record(conn, self.run_id, None, batch)
        mirror_lines(self.engine, self.storage, self.run_id, lines)


def used_record(
    key: str,
    cycle: int,
    result: T,
    use: Callable[[T], U],
    stand_in: Callable[[], T],
    becomes: str,
    replace: Callable[[str, int, Any, Event], None],
) -> U:
    """`Ledger.used` on any journal: `replace` journals the stand-in with the skip's event.

    Kept apart from `Ledger` so that every persistence skips a bad record the same way.
    """
    try:
        return use(result)
    except Exception as exc:  # noqa: BLE001 - any failure of a pure use is the record's
        reason = _reason(exc)
        if not skip_bad_records.get():
            raise BadRecordError(key, reason) from exc
    replacement = stand_in()
    skipped = RecordSkipped(key=key, reason=reason, becomes=becomes)
    replace(key, cycle, replacement, Event(cycle, keys.record_skipped(key), skipped))
    return use(replacement)


_JOURNAL_COLUMNS = ("run_id", "key", "cycle", "result")
_EVENT_COLUMNS = ("run_id", "key", "cycle", "event_type", "timestamp", "payload")


def write_record(
    conn: Tx, run_id: str, record: dict[str, Any] | None, batch: Sequence[Event]
) -> list[str]:
    """Insert a journal record (if any) and its events, unless present, in `conn`'s transaction.

    Returns the JSONL lines of the events that were new. On PostgreSQL this is one
    statement (the record inserted by a writable CTE, the events by one multi-row insert),
    and when nothing else ran in the transaction it commits on its own (`autocommit`):
    one round trip where BEGIN, a statement per row and COMMIT made four or five.
    """
    if record is None and not batch:
        return []
    if conn.dialect.name != "postgresql":
        if record is not None:
            insert_ignore(conn, journal, record)
        return insert_events(conn, run_id, batch)
    rows = [event_row(run_id, ev) for ev in batch]
    params = dict(record or {})
    for i, row in enumerate(rows):
        params.update({f"{c}_{i}": row[c] for c in _EVENT_COLUMNS})
    statement = _pg_record(record is not None, len(rows))
    with autocommit(conn):
        if not rows:
            statement.execute(conn, params)
            return []
        new = {str(key) for (key,) in statement.rows(conn, params)}
    return [line_text(run_id, row) for row in rows if row["key"] in new]


@cache
def _pg_record(with_record: bool, events_n: int) -> Prepared:
    """PostgreSQL's one statement for `write_record`: a record and/or `events_n` events.

    Event parameters are named `<column>_<i>`; the events' insert returns the new keys.
    """
    from sqlalchemy.dialects.postgresql import insert as pg_insert  # PostgreSQL runs only

    def build(_: str) -> Any:
        if not events_n:
            return (
                pg_insert(journal)
                .values(named(journal, *_JOURNAL_COLUMNS))
                .on_conflict_do_nothing()
            )
        rows = [
            {c: bindparam(f"{c}_{i}", type_=events.c[c].type) for c in _EVENT_COLUMNS}
            for i in range(events_n)
        ]
        stmt = pg_insert(events).values(rows).on_conflict_do_nothing().returning(events.c.key)
        if with_record:
            record = pg_insert(journal).values(named(journal, *_JOURNAL_COLUMNS))
            stmt = stmt.add_cte(record.on_conflict_do_nothing().cte("record"))
        return stmt

    return Prepared(build)
