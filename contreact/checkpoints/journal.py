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
shares a set of its scope's recorded keys with the other steps of that invocation. The set
is checked against the database once per invocation (a count of the scope's records) and
reloaded only when another process recorded something meanwhile; inside one invocation
only this process drives the thread (the registry refuses a second driver), so what it
records itself is all that can change. Only a key found in the set costs a query (its
result), and that happens only when a step is replayed.
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
from sqlalchemy.dialects.postgresql import insert as pg_insert

from contreact.checkpoints import keys
from contreact.checkpoints.engines import engine_for
from contreact.checkpoints.events import (
    Event,
    RecordSkipped,
    event_row,
    insert_events,
    line_text,
    mirror_lines,
)
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
_COUNT = Prepared(lambda _: select(func.count()).select_from(journal).where(_RUN))
_KEYS = Prepared(lambda _: select(journal.c.key).where(_RUN))

_MISSING: Any = object()


class _Recorded:
    """The keys recorded in one scope, as this process knows them."""

    def __init__(self) -> None:
        self.keys: set[str] = set()
        self.invocation: str | None = None
        """The invocation that last checked the set against the database."""


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
        """The scope's recorded keys, checked against the database once per invocation."""
        if self.invocation is None:
            return None
        with _known_lock:
            known = _known.setdefault((self.engine, self.run_id), _Recorded())
            _known.move_to_end((self.engine, self.run_id))
            while len(_known) > _KNOWN_SCOPES:
                _known.popitem(last=False)
        if known.invocation != self.invocation:
            params = {"run_id": self.run_id}
            with reading(self.engine) as conn:
                if _COUNT.first(conn, params) != (len(known.keys),):
                    known.keys = {str(k) for (k,) in _KEYS.rows(conn, params)}
            known.invocation = self.invocation
        return known

    def recall(self, key: str) -> Any:
        """The journaled result for `key`, or `Ledger.MISSING`."""
        known = self._recorded()
        if known is not None and key not in known.keys:
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
            known.keys.add(key)
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
        try:
            return use(result)
        except Exception as exc:  # noqa: BLE001 - any failure of a pure use is the record's
            reason = _reason(exc)
            if not skip_bad_records.get():
                raise BadRecordError(key, reason) from exc
        replacement = stand_in()
        skipped = RecordSkipped(key=key, reason=reason, becomes=becomes)
        self.replace(key, cycle, replacement, Event(cycle, keys.record_skipped(key), skipped))
        return use(replacement)

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
