"""The agent's persistent key-value memory and the five memory tools.

Memory lives in storage keyed by (run id, key) (`checkpoints.memories`). The run id comes
from the injected session, never from the model, so no tool call can reach another run's
keys. Every tool works through the session's `memory`, which the journal transaction that
records its result hands over: the change and its record commit together, so crash + resume
neither loses nor doubles a write.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine, select

from contreact.checkpoints.memories import Memory
from contreact.checkpoints.schema import memories


class ToolError(Exception):
    """A tool refused the call; the message goes back to the model as the tool result."""


@dataclass(frozen=True)
class ToolSession:
    """Hidden arguments every tool receives; never part of the model's schema."""

    run_id: str
    memory: Memory
    """The run's memories, in the transaction that records the call."""
    memory_value_chars: int = 50_000
    cycle: int = 0
    key: str = ""
    """The call's idempotency key (scope and journal key), the same on every attempt."""
    details: dict[str, Any] = field(default_factory=dict)
    """Structured facts a tool leaves for its event (e.g. the operator's reply policy)."""


MAX_KEY_CHARS = 500


def _check_key(key: str) -> str:
    if not key.strip():
        raise ToolError("the key must not be empty")
    if len(key) > MAX_KEY_CHARS:
        raise ToolError(f"the key is {len(key)} characters long; the limit is {MAX_KEY_CHARS}")
    return key


def _value(session: ToolSession, key: str) -> str | None:
    return session.memory.value(key)


def _keys(session: ToolSession) -> list[str]:
    return session.memory.keys()


def write_memory(session: ToolSession, key: str, value: str) -> str:
    """Save a memory under a key. An existing memory with that key is replaced.

    Args:
        session: Injected run handle (hidden from the model).
        key: The name to store the memory under.
        value: The text to remember.
    """
    _check_key(key)
    if len(value) > session.memory_value_chars:
        raise ToolError(
            f"the value is {len(value)} characters long; the limit is "
            f"{session.memory_value_chars}. Store a shorter value or split it over several keys."
        )
    existed = _value(session, key) is not None
    session.memory.put(key, value)
    verb = "Updated" if existed else "Created"
    return f"{verb} memory '{key}' ({len(value)} characters)."


def read_memory(session: ToolSession, key: str) -> str:
    """Read the memory stored under a key.

    Args:
        session: Injected run handle (hidden from the model).
        key: The name of the memory to read.
    """
    value = _value(session, _check_key(key))
    if value is None:
        raise ToolError(f"no memory is stored under the key '{key}'")
    return value


def list_memories(session: ToolSession) -> str:
    """List the keys of all your stored memories."""
    keys = _keys(session)
    if not keys:
        return "No memories are stored yet."
    return f"{len(keys)} memories: " + ", ".join(keys)


def delete_memory(session: ToolSession, key: str) -> str:
    """Delete the memory stored under a key.

    Args:
        session: Injected run handle (hidden from the model).
        key: The name of the memory to delete.
    """
    _check_key(key)
    if not session.memory.delete(key):
        raise ToolError(f"no memory is stored under the key '{key}'")
    return f"Deleted memory '{key}'."


def search_memory_keys(session: ToolSession, pattern: str) -> str:
    """Find the keys of your memories that contain a piece of text (case-sensitive).

    Args:
        session: Injected run handle (hidden from the model).
        pattern: The text to look for inside keys; matched literally.
    """
    if not pattern:
        raise ToolError("the pattern must not be empty")
    # Filtering in Python keeps `%`, `_` and regex characters literal on every backend.
    hits = [k for k in _keys(session) if pattern in k]
    if not hits:
        return f"No keys contain '{pattern}'."
    return f"{len(hits)} keys contain '{pattern}': " + ", ".join(hits)


def memory_snapshot(engine: Engine, run_id: str) -> dict[str, str]:
    """All of a run's memories as a dict (for `contreact memory` and reports)."""
    with engine.connect() as conn:
        rows = conn.execute(
            select(memories.c.key, memories.c.value)
            .where(memories.c.run_id == run_id)
            .order_by(memories.c.key)
        )
        return {str(k): str(v) for k, v in rows}
