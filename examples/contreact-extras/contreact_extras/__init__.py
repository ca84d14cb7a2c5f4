"""Example contreact extensions: two tools and a hook, installed as a package of their own.

`pip install examples/contreact-extras` makes `clock` and `dice` every run's tools (the
`contreact.tools` entry points in pyproject.toml); `hooks: ["contreact_extras:guard"]` in a
run config adds the hook. Each tool appends one line, `NAME KEY`, to the file
`CONTREACT_EXTRAS_COUNT_FILE` names (if set) every time it really runs, and so does the hook
(`guard KEY`) for every call it sees, so a test can count executions across kill -9 and resume.
"""

from __future__ import annotations

import hashlib
import os
from datetime import UTC, datetime
from typing import Any

from contreact.tools.marks import tool


def _count(name: str, key: str) -> None:
    path = os.environ.get("CONTREACT_EXTRAS_COUNT_FILE")
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(f"{name} {key}\n")


@tool(effect="pure")
def clock(idempotency_key: str = "") -> str:
    """Tell the current date and time (UTC)."""
    _count("clock", idempotency_key)
    return datetime.now(UTC).strftime("It is %Y-%m-%d %H:%M:%S UTC.")


@tool(effect="effectful")
def dice(sides: int = 6, idempotency_key: str = "") -> str:
    """Roll a die.

    Args:
        sides: How many sides the die has.
    """
    _count("dice", idempotency_key)
    # The roll is drawn from the call's key: a call run again after a crash rolls the same.
    roll = int(hashlib.sha256(idempotency_key.encode()).hexdigest(), 16) % max(sides, 1) + 1
    return f"You rolled a {roll} on a {sides}-sided die."


class Guard:
    """Vetoes `delete` in the first two cycles: memories may not be deleted early on."""

    def before_tool_call(self, call: dict[str, Any]) -> dict[str, Any] | None:
        """Veto `delete` in cycles 1 and 2; let everything else run."""
        _count("guard", call["key"])
        if call["name"] == "delete" and call["cycle"] <= 2:
            return {"veto": "deleting memories is not allowed in cycles 1-2"}
        return None


guard = Guard()
