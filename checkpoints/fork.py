"""Branching a run: copy its history up to the end of a cycle into a new run.

A fork starts at a cycle boundary, where the checkpointed state is fully determined by
the cycle number, the advisory and the task; everything else a cycle boundary carries
lives in tables. So a fork copies the finished cycles (reflections, metrics) and the
events up to that cycle, and rebuilds the memory as it was then by replaying the
successful `write` and `delete` calls of those cycles — memory changes only through
them. The original run is only read. Every insert is idempotent, so a fork interrupted
half-way is completed by running it again.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Engine, delete, select

from checkpoints.db import cycles, events, insert_ignore, memories, upsert


def memory_at(engine: Engine, run_id: str, upto_cycle: int) -> dict[str, str]:
    """A run's memory as it was at the end of `upto_cycle`, replayed from its TOOL_CALL events."""
    query = (
        select(events.c.payload)
        .where(
            events.c.run_id == run_id,
            events.c.event_type == "TOOL_CALL",
            events.c.cycle <= upto_cycle,
        )
        .order_by(events.c.id)
    )
    memory: dict[str, str] = {}
    with engine.connect() as conn:
        for (raw,) in conn.execute(query):
            call: dict[str, Any] = json.loads(raw)
            if call.get("error") or call.get("refused"):
                continue
            args = call.get("parameters") or {}
            if call.get("tool_name") == "write":
                memory[str(args["key"])] = str(args["value"])
            elif call.get("tool_name") == "delete":
                memory.pop(str(args["key"]), None)
    return memory


def copy_history(engine: Engine, source: str, target: str, upto_cycle: int) -> None:
    """Give run `target` the cycles, events and memory of `source` up to `upto_cycle`."""
    memory = memory_at(engine, source, upto_cycle)
    with engine.begin() as conn:
        for row in conn.execute(
            select(cycles).where(cycles.c.run_id == source, cycles.c.cycle <= upto_cycle)
        ).mappings():
            insert_ignore(conn, cycles, {**row, "run_id": target})
        for row in conn.execute(
            select(events)
            .where(
                events.c.run_id == source,
                events.c.cycle <= upto_cycle,
                events.c.event_type != "RUN_END",
            )
            .order_by(events.c.id)
        ).mappings():
            copied = {k: v for k, v in row.items() if k != "id"}
            insert_ignore(conn, events, {**copied, "run_id": target})
        conn.execute(delete(memories).where(memories.c.run_id == target))
        for key, value in memory.items():
            upsert(
                conn, memories, {"run_id": target, "key": key, "value": value}, ["run_id", "key"]
            )
