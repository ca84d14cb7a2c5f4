"""Per-cycle budgets: when tools are withdrawn, when a cycle must close, what is refused.

Local models loop: they call the same tool forever, or never stop calling tools. The
budgets bound every cycle without using LangGraph's recursion limit as the stop. All
functions are pure over the checkpointed counters, so a replay decides the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from contreact.graph.state import Context, CycleStats

REPEAT_LIMIT = 3
"""The third identical (name, arguments) call in a cycle is refused instead of run."""


def tools_offered(stats: CycleStats, ctx: Context) -> bool:
    """Whether the next model call gets tools.

    Not once the tool budget is spent, and not on the cycle's last allowed step (which
    must produce the reflection).
    """
    return (
        stats["tool_calls"] < ctx.limits.max_tool_calls_per_cycle
        and stats["steps"] < ctx.limits.max_steps_per_cycle - 1
        and not stats["out_of_time"]
    )


def steps_left(stats: CycleStats, ctx: Context) -> bool:
    """Whether another model call is allowed in this cycle.

    Once the wall-clock limit has passed, the one call made without tools was the last.
    """
    return stats["steps"] < ctx.limits.max_steps_per_cycle and not stats["out_of_time"]


def past_time_limit(cycle_started: float, now: float, ctx: Context) -> bool:
    """Whether the cycle has run longer than its wall-clock limit (if it has one)."""
    return (
        bool(ctx.limits.cycle_seconds)
        and cycle_started > 0
        and now - cycle_started > (ctx.limits.cycle_seconds or 0)
    )


@dataclass(frozen=True)
class Refusal:
    """Why a well-formed call is answered with corrective text instead of being run."""

    kind: Literal["budget", "repeated"]
    text: str


def refusal(
    signature: str, calls_so_far: int, call_counts: Mapping[str, int], ctx: Context
) -> Refusal | None:
    """Why a well-formed call must not run (budget spent, repeated), or None to run it.

    Args:
        signature: The call's canonical (name, arguments) signature.
        calls_so_far: Calls already counted this cycle, this one excluded.
        call_counts: How often each signature was called this cycle, this one excluded.
        ctx: The run's budgets.
    """
    budget = ctx.limits.max_tool_calls_per_cycle
    if calls_so_far >= budget:
        return Refusal(
            "budget",
            f"Error: the tool budget of this cycle ({budget} calls) is "
            "spent; this call was not run. Finish the cycle with your final response.",
        )
    if call_counts.get(signature, 0) >= REPEAT_LIMIT - 1:
        return Refusal(
            "repeated",
            "Error: you already made this exact call twice in this cycle; it was not run "
            "again. Use the earlier result, or try something different.",
        )
    return None


def truncate_output(text: str, limit: int) -> str:
    """Cut tool output to `limit` characters with a visible marker saying how much was cut."""
    if limit <= 0 or len(text) <= limit:
        return text
    cut = len(text) - limit
    return f"{text[:limit]}\n[... output truncated: {cut} more characters not shown ...]"
