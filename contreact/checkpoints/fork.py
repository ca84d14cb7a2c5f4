"""Branching a run: give a new scope the history of its parent up to a fork point.

One mechanism serves `contreact fork` (a new run from the end of a cycle) and Studio time
travel (a branch of the same thread from any saved checkpoint, see
`checkpoints.lineage`): the branch's scope receives the parent scope's finished cycles
(reflections, metrics), the events made before the fork point, and the memory as it was
there, rebuilt by replaying the successful `write` and `delete` calls made before it
(memory changes only through them). The journal is not copied: every step after the fork
point acts afresh. The parent is only read, so its log, memory and state stay
byte-identical. Every insert is idempotent, so a branch interrupted half-way is
completed by running it again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Engine, delete, select

from contreact.checkpoints.event_schema import Intervention, ToolCall
from contreact.checkpoints.keys import position_of
from contreact.checkpoints.schema import cycles, events, memories, similarity_keys
from contreact.checkpoints.statements import insert_ignore, upsert


@dataclass(frozen=True)
class ForkPoint:
    """Where a branch leaves its parent, in checkpointed counters.

    A fork at the end of cycle K is `ForkPoint(cycle=K + 1)`.
    """

    cycle: int
    """The cycle the branch continues in; every earlier cycle is inherited whole."""
    steps: int = 0
    """Model calls of `cycle` made before the fork point (their answers are inherited)."""
    steps_done: int = 0
    """Model calls of `cycle` whose tool calls had all run (their effects are inherited)."""
    opened: bool = False
    """Whether `cycle` had begun (its CYCLE_START is inherited)."""

    def inherits(self, key: str, event_type: str) -> bool:
        """Whether the parent's event `key` happened before this fork point."""
        if event_type == "RUN_END":
            return False
        where = position_of(key)
        if where.cycle is None:
            return True
        if where.cycle != self.cycle:
            return where.cycle < self.cycle
        if where.step is None:
            return where.kind == "start" and self.opened
        return where.step < (self.steps_done if where.tool else self.steps)


def memory_at(conn: Connection, scope: str, point: ForkPoint) -> dict[str, str]:
    """A scope's memory as it was at `point`, replayed from its logged events."""
    query = (
        select(events.c.key, events.c.payload, events.c.event_type)
        .where(
            events.c.run_id == scope,
            events.c.event_type.in_(MEMORY_EVENTS),
            events.c.cycle <= point.cycle,
        )
        .order_by(events.c.id)
    )
    memory: dict[str, str] = {}
    for key, raw, kind in conn.execute(query):
        if point.inherits(str(key), str(kind)):
            replay_event(memory, str(kind), json.loads(raw))
    return memory


MEMORY_EVENTS = (ToolCall.event_type, Intervention.event_type)
"""The events that change a run's memory: a tool call (`write`, `delete`) and a wipe."""


def replay_event(memory: dict[str, str], event_type: str, payload: dict[str, Any]) -> None:
    """Apply one logged event to `memory` as it changed the run's memory, if it did.

    Memory changes only through successful `write` and `delete` calls and a memory wipe
    (`interventions: [{memory: {clear: true}}]`), so replaying a scope's `MEMORY_EVENTS`
    in log order rebuilds its memory at any point.
    """
    if event_type == Intervention.event_type:
        if Intervention.read(payload).kind == "memory":
            memory.clear()
        return
    call = ToolCall.read(payload)
    if call.error or call.refused:
        return
    if call.tool_name == "write":
        memory[str(call.parameters["key"])] = str(call.parameters["value"])
    elif call.tool_name == "delete":
        memory.pop(str(call.parameters["key"]), None)


def copy_history(conn: Connection, source: str, target: str, point: ForkPoint) -> None:
    """Give scope `target` the cycles, events and memory of `source` before `point`.

    Runs in the caller's transaction (the branch's registration commits with it).
    """
    memory = memory_at(conn, source, point)
    for row in conn.execute(
        select(cycles).where(cycles.c.run_id == source, cycles.c.cycle < point.cycle)
    ).mappings():
        insert_ignore(conn, cycles, {**row, "run_id": target})
    for row in conn.execute(
        select(similarity_keys).where(
            similarity_keys.c.run_id == source, similarity_keys.c.cycle < point.cycle
        )
    ).mappings():
        insert_ignore(conn, similarity_keys, {**row, "run_id": target})
    for row in conn.execute(
        select(events)
        .where(events.c.run_id == source, events.c.cycle <= point.cycle)
        .order_by(events.c.id)
    ).mappings():
        if point.inherits(str(row["key"]), str(row["event_type"])):
            copied = {k: v for k, v in row.items() if k != "id"}
            insert_ignore(conn, events, {**copied, "run_id": target})
    conn.execute(delete(memories).where(memories.c.run_id == target))
    for key, value in memory.items():
        upsert(conn, memories, {"run_id": target, "key": key, "value": value}, ["run_id", "key"])


def fork_run_history(engine: Engine, source: str, target: str, upto_cycle: int) -> None:
    """`contreact fork`: run `target` starts with `source`'s history up to cycle `upto_cycle`."""
    with engine.begin() as conn:
        copy_history(conn, source, target, ForkPoint(cycle=upto_cycle + 1))
