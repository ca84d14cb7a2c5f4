"""The operator's inbox: every agent message still waiting for a reply, across a storage.

A paused run waits on an interrupt in its checkpoint; a run begun in Studio pauses without
the registry knowing. Both the CLI's `contreact operator` and the console read it here.
"""

from __future__ import annotations

from dataclasses import dataclass

from contreact.checkpoints.engines import engine_for
from contreact.checkpoints.registry import (
    list_runs,
)
from contreact.checkpoints.saver import open_saver
from contreact.checkpoints.storage import Storage
from contreact.engine.drive import operator_asks
from contreact.graph.wiring import builder


@dataclass(frozen=True)
class PendingMessage:
    """An agent's message waiting for the operator's reply."""

    run_id: str
    cycle: int
    message: str
    since: str
    """When the run paused on it (ISO-8601 UTC)."""


def pending_operator_messages(storage: Storage) -> list[PendingMessage]:
    """The messages every paused run of this storage is waiting on, oldest first."""
    engine = engine_for(storage)
    # A run started in Studio pauses without the CLI knowing: look at its checkpoint.
    paused = [
        r
        for r in list_runs(engine)
        if r.status == "paused" or (r.origin == "studio" and r.status == "running")
    ]
    found: list[PendingMessage] = []
    if not paused:
        return found
    with open_saver(storage) as saver:
        graph = builder.compile(checkpointer=saver)
        for record in paused:
            snapshot = graph.get_state({"configurable": {"thread_id": record.thread_id}})
            for ask in operator_asks(tuple(i.value for i in snapshot.interrupts)):
                found.append(
                    PendingMessage(
                        record.run_id,
                        int(ask.get("cycle", 0)),
                        str(ask.get("message", "")),
                        str(snapshot.created_at or record.updated_at),
                    )
                )
    return sorted(found, key=lambda p: p.since)
