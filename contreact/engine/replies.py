"""The operator's reply to an agent's message: recorded once, taken by the run's next drive.

A reply is a row keyed by the run and the saved checkpoint the run waits on, written in one
transaction with the run's move from paused to running. Two replies sent at once (two
browsers, a browser and `contreact reply`) therefore cannot both land: the key refuses the
second, and its sender is told. Whichever process drives the run next (`contreact reply`
itself, `contreact resume`, a study's worker, the console's resume) finds the row and
answers the agent with it through the interrupt's resume, as a reply typed at the terminal
is; a drive killed after the agent got it replays it from the journal, one killed before
finds the row again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, insert, select, update
from sqlalchemy.exc import IntegrityError

from contreact.checkpoints.engines import engine_for
from contreact.checkpoints.event_schema import utc_now
from contreact.checkpoints.registry import RunRecord, get_run
from contreact.checkpoints.saver import open_saver
from contreact.checkpoints.schema import operator_replies, runs
from contreact.checkpoints.storage import Storage
from contreact.errors import NotWaitingError
from contreact.graph.wiring import builder
from contreact.tools.operator import OPERATOR_INTERRUPT

ANSWERED_REASON = "the operator replied; its next drive answers the agent"
"""The registry's reason while a reply waits to be taken by a drive."""


class AlreadyAnsweredError(Exception):
    """Another reply to the same message was recorded first (the message is answered)."""


@dataclass(frozen=True)
class Waiting:
    """An agent's message that waits for the operator's reply."""

    run_id: str
    ask: str
    """The saved checkpoint the run waits on: which message a reply answers."""
    cycle: int
    message: str
    since: str
    """When the run paused on it (ISO-8601 UTC)."""


def may_wait(record: RunRecord) -> bool:
    """Whether the run can be waiting on the operator (a Studio run says so only in its state)."""
    return record.status == "paused" or (record.origin == "studio" and record.status == "running")


def waiting_messages(graph: Any, record: RunRecord) -> list[Waiting]:
    """The operator messages `record`'s thread is paused on, in the compiled `graph`."""
    snapshot = graph.get_state({"configurable": {"thread_id": record.thread_id}})
    ask = str((snapshot.config or {}).get("configurable", {}).get("checkpoint_id") or "")
    return [
        Waiting(
            record.run_id,
            ask,
            int(value.get("cycle", 0)),
            str(value.get("message", "")),
            str(snapshot.created_at or record.updated_at),
        )
        for value in (i.value for i in snapshot.interrupts)
        if isinstance(value, dict) and value.get("type") == OPERATOR_INTERRUPT
    ]


def waiting_in(storage: Storage, records: list[RunRecord]) -> list[Waiting]:
    """The messages the runs among `records` that may wait are waiting on, oldest first."""
    found: list[Waiting] = []
    candidates = [r for r in records if may_wait(r)]
    if not candidates:
        return found
    with open_saver(storage) as saver:
        graph = builder.compile(checkpointer=saver)
        for record in candidates:
            found += waiting_messages(graph, record)
    return sorted(found, key=lambda w: w.since)


def post_reply(storage: Storage, run_id: str, text: str, *, ask: str | None = None) -> Waiting:
    """Record `text` as the reply to the message run `run_id` waits on; exactly one reply wins.

    Args:
        storage: Where the run lives.
        run_id: The run.
        text: The reply.
        ask: The message answered, as the sender saw it (`Waiting.ask`); None: whichever
            message the run waits on now.

    Returns:
        The message answered.

    Raises:
        RunNotFoundError: no such run.
        NotWaitingError: the run waits on no message (and no `ask` was named).
        AlreadyAnsweredError: the message named by `ask` waits no longer, or another reply
            to it was recorded first.
    """
    engine = engine_for(storage)
    record = get_run(engine, run_id)
    waiting = waiting_in(storage, [record])
    if not waiting or (ask is not None and waiting[0].ask != ask):
        if ask is not None:
            raise AlreadyAnsweredError(run_id)
        raise NotWaitingError(run_id)
    answered = waiting[0]
    try:
        with engine.begin() as conn:
            conn.execute(
                insert(operator_replies).values(
                    run_id=run_id, ask=answered.ask, reply=text, created_at=utc_now()
                )
            )
            conn.execute(
                update(runs)
                .where(runs.c.run_id == run_id, runs.c.status == "paused")
                .values(status="running", reason=ANSWERED_REASON, pid=None, updated_at=utc_now())
            )
    except IntegrityError:
        raise AlreadyAnsweredError(run_id) from None
    return answered


def recorded_reply(engine: Engine, run_id: str, ask: str) -> str | None:
    """The reply recorded for the message run `run_id` waits on at checkpoint `ask`, if any."""
    query = select(operator_replies.c.reply).where(
        operator_replies.c.run_id == run_id, operator_replies.c.ask == ask
    )
    with engine.connect() as conn:
        found = conn.execute(query).scalar_one_or_none()
    return None if found is None else str(found)
