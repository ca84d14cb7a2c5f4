"""Stub servers set up the way tests need them."""

from __future__ import annotations

from typing import Any

from contreact.stub import StubServer


def scripted_stub(script: dict[int, list[Any]], **extra: Any) -> StubServer:
    """A started stub answering from `script` (cycle -> list of step replies)."""
    return StubServer.from_scenario({"agent": "scripted", "script": script, **extra}).start()
