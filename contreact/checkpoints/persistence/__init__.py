"""Persistence, the front door: the whole of what the nodes ask of storage, in one contract.

The nodes import from `checkpoints` this package and nothing else (the architecture test
holds them to it), so what a step may do to storage is read here, not gathered from a
dozen modules:

* `Persistence` is a run's storage as the graph's context hands it over
  (`Context.persistence_backend`; None there means `sql_persistence` of the run's storage). It
  says which lineage a step runs in (`enter_step`) and gives a scope's `Ledger`.
* `Ledger` is one scope's exactly-once journal: `once(key, cycle, act)` runs `act` only if
  nothing is recorded under `key`, and records its result with its events; a replay
  returns the recorded result. It also records events with no result (`emit`) and answers
  the reads a step makes outside a side effect (notes of finished cycles, event counts).
* `Unit` is what an `act` may do inside the journal's transaction: change memory, store
  the cycle and its similarity keys, look up similar notes. All of it commits with the
  act's record, or none of it does.

`SqlPersistence` (`sql`) is the product's, delegating to the modules of `checkpoints`
(same statements, same transactions); `MemoryPersistence` (`memory`) keeps the same
promises in dicts, for the nodes' unit tests. The value types a node needs (events and
their payloads, keys, notes, cycle records) are re-exported here, and so is what the
runner drives a run with (`checkpointing`).
"""

from __future__ import annotations

from contreact.checkpoints import keys
from contreact.checkpoints.cycles import CycleRecord, Note, NoteTail
from contreact.checkpoints.event_schema import (
    ContextTrim,
    CycleEnd,
    CycleStart,
    Error,
    Event,
    Extensions,
    HookAction,
    Intervention,
    LlmInvocation,
    OperatorMessage,
    ParseFailure,
    RunEnd,
    RunStart,
    Similarity,
    ToolCall,
)
from contreact.checkpoints.fork import ForkPoint
from contreact.checkpoints.lineage import scope_of
from contreact.checkpoints.memories import Memory
from contreact.checkpoints.persistence.checkpointing import (
    Checkpointed,
    ForeignThreadError,
    Latest,
    Policy,
    Stop,
    enter_step,
    open_run,
)
from contreact.checkpoints.persistence.contract import Act, Ledger, Persistence, Unit
from contreact.checkpoints.persistence.sql import SqlPersistence
from contreact.checkpoints.storage import Storage


def sql_persistence(storage: Storage) -> Persistence:
    """The product's persistence: `storage`'s database, through the `checkpoints` modules."""
    return SqlPersistence(storage)


__all__ = [
    "Act",
    "Checkpointed",
    "ContextTrim",
    "CycleEnd",
    "CycleRecord",
    "CycleStart",
    "Error",
    "Event",
    "Extensions",
    "ForeignThreadError",
    "ForkPoint",
    "HookAction",
    "Intervention",
    "Latest",
    "Ledger",
    "LlmInvocation",
    "Memory",
    "Note",
    "NoteTail",
    "OperatorMessage",
    "ParseFailure",
    "Persistence",
    "Policy",
    "RunEnd",
    "RunStart",
    "Similarity",
    "SqlPersistence",
    "Stop",
    "ToolCall",
    "Unit",
    "enter_step",
    "keys",
    "open_run",
    "scope_of",
    "sql_persistence",
]
