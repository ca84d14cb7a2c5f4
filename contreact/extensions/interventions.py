"""Interventions: changes to a run at given cycles, made without code, each applied once.

The config lists them (`config.extensions.Intervention`); the nodes ask here which act in a
cycle, and journal each under its cycle and its index in the list, so a kill and a resume
neither repeat nor lose one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def applying(items: Sequence[Any], cycle: int, kind: str) -> list[tuple[int, Any]]:
    """The interventions of `kind` that act in `cycle`, with their index in the config."""
    return [(i, x) for i, x in enumerate(items) if x.kind == kind and x.applies_to(cycle)]
