"""Format health: how well a model kept to the conversation's format, per model, from events.

Real small models fail in ways a metric table hides: answers cut off at `num_predict`,
reflections that only repeat the prompt, turns the model invented, call markup nobody can
read, the call format's placeholders sent back as calls. Before comparing what two models
*did*, a researcher needs to know whether each could *speak the format* at all; the report
shows one line per model with these counts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from sqlalchemy import Engine

from contreact.analysis.runs import events_of_type
from contreact.checkpoints.registry import RunRecord

__all__ = ["FormatHealth", "format_health", "run_health"]

# Reasons the parser gives a corrective turn for (its ERROR kinds and CYCLE_END flags).
_UNREADABLE = "unreadable_markup"
_PLACEHOLDER = "echoed_placeholder_call"


@dataclass(frozen=True)
class FormatHealth:
    """One model's format counts over its runs."""

    model: str
    runs: int = 0
    steps: int = 0
    """Model calls (LLM_INVOCATION events)."""
    calls_parsed: int = 0
    """Tool calls read from the answers (TOOL_CALL events: run, refused or invalid)."""
    unreadable_markup: int = 0
    """Answers with call markup the parser could not read."""
    placeholder_calls: int = 0
    """Answers that sent the call format's placeholders back as a call."""
    truncations: int = 0
    """Answers cut off at `num_predict` or the context's end (`done_reason: length`)."""
    echoes: int = 0
    """Reflections that mostly repeat the prompt or earlier turns (`echoed_prompt`)."""
    invented_turns: int = 0
    """Answers that went on to write someone else's turn (cut there)."""

    def line(self) -> str:
        """The report's one line for this model."""
        runs = f"{self.runs} run" + ("" if self.runs == 1 else "s")
        return (
            f"{self.model} ({runs}): {self.steps} steps, {self.calls_parsed} calls parsed, "
            f"{self.unreadable_markup} unreadable markup, "
            f"{self.placeholder_calls} echoed placeholder calls, "
            f"{self.truncations} truncations, {self.echoes} echoes, "
            f"{self.invented_turns} invented turns"
        )

    def __add__(self, other: FormatHealth) -> FormatHealth:
        counts = {
            f.name: getattr(self, f.name) + getattr(other, f.name)
            for f in fields(self)
            if f.name != "model"
        }
        return FormatHealth(model=self.model, **counts)


def _count(items: Iterable[bool]) -> int:
    return sum(1 for i in items if i)


def run_health(model: str, events: Sequence[Mapping[str, Any]]) -> FormatHealth:
    """The format counts of one run's events."""

    def of(kind: str) -> list[dict[str, Any]]:
        return [dict(e.get("payload") or {}) for e in events if e.get("event_type") == kind]

    calls, ends, errors = of("LLM_INVOCATION"), of("CYCLE_END"), of("ERROR")

    def reason(name: str) -> int:
        # Counted per answer from ERROR events where the parser logs them, else per cycle.
        logged = _count(e.get("kind") == name for e in errors)
        return logged or _count(name in (e.get("flags") or []) for e in ends)

    return FormatHealth(
        model=model,
        runs=1,
        steps=len(calls),
        calls_parsed=len(of("TOOL_CALL")),
        unreadable_markup=reason(_UNREADABLE),
        placeholder_calls=reason(_PLACEHOLDER),
        truncations=_count(c.get("done_reason") == "length" for c in calls),
        echoes=_count("echoed_prompt" in (e.get("flags") or []) for e in ends),
        invented_turns=_count("invented_turn" in (c.get("flags") or []) for c in calls),
    )


COUNTED = ("LLM_INVOCATION", "TOOL_CALL", "CYCLE_END", "ERROR")
"""The event types `run_health` counts: only these are read of a long run's log."""


def format_health(engine: Engine, runs: Sequence[RunRecord]) -> list[FormatHealth]:
    """Per model (in order of first appearance), the format counts summed over its runs."""
    by_model: dict[str, FormatHealth] = {}
    for run in runs:
        read = events_of_type(engine, run.run_id, COUNTED)
        health = run_health(run.model, [{"event_type": t, "payload": p} for _, t, p in read])
        by_model[run.model] = by_model[run.model] + health if run.model in by_model else health
    return list(by_model.values())
