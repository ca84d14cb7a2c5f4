"""The operator's inbox: every agent message still waiting for a reply, across a storage.

A paused run waits on an interrupt in its checkpoint; a run begun in Studio pauses without
the registry knowing. Both the CLI's `contreact operator` and the console read it here.
"""

from __future__ import annotations

from contreact.checkpoints.engines import engine_for
from contreact.checkpoints.registry import (
    list_runs,
)
from contreact.checkpoints.storage import Storage
from contreact.engine.replies import Waiting, waiting_in

PendingMessage = Waiting
"""An agent's message waiting for the operator's reply (`engine.replies.Waiting`)."""


def pending_operator_messages(storage: Storage) -> list[PendingMessage]:
    """The messages every paused run of this storage is waiting on, oldest first."""
    # A run started in Studio pauses without the CLI knowing: its checkpoint says so.
    return waiting_in(storage, list_runs(engine_for(storage)))
