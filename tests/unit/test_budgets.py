"""Per-cycle budgets: withdrawing tools, refusing repeats and over-budget calls, truncation."""

from __future__ import annotations

from contreact.graph.state import Context, new_stats
from contreact.nodes.budgets import (
    past_time_limit,
    refusal,
    steps_left,
    tools_offered,
    truncate_output,
)

CTX = Context(limits={"max_steps_per_cycle": 4, "max_tool_calls_per_cycle": 3, "cycle_seconds": 10})


def test_tools_withdrawn_when_tool_budget_spent_or_last_step() -> None:
    stats = new_stats()
    assert tools_offered(stats, CTX)
    assert not tools_offered({**stats, "tool_calls": 3}, CTX)
    assert tools_offered({**stats, "steps": 2}, CTX)
    assert not tools_offered({**stats, "steps": 3}, CTX), "the last step must answer"
    assert not tools_offered({**stats, "out_of_time": True}, CTX)


def test_steps_left() -> None:
    assert steps_left({**new_stats(), "steps": 3}, CTX)
    assert not steps_left({**new_stats(), "steps": 4}, CTX)
    assert not steps_left({**new_stats(), "out_of_time": True}, CTX)


def test_refusals() -> None:
    assert refusal("read:{}", 0, {}, CTX) is None
    assert refusal("read:{}", 0, {"read:{}": 1}, CTX) is None
    repeated = refusal("read:{}", 2, {"read:{}": 2}, CTX)
    assert repeated is not None and repeated.kind == "repeated" and "twice" in repeated.text
    spent = refusal("write:{}", 3, {}, CTX)
    assert spent is not None and spent.kind == "budget" and "3 calls" in spent.text


def test_truncation_is_visible() -> None:
    assert truncate_output("short", 10) == "short"
    cut = truncate_output("a" * 25, 10)
    assert cut.startswith("a" * 10) and "15 more characters" in cut


def test_time_limit() -> None:
    assert not past_time_limit(100.0, 105.0, CTX)
    assert past_time_limit(100.0, 111.0, CTX)
    assert not past_time_limit(0.0, 111.0, CTX), "an unopened cycle has no start time"
    assert not past_time_limit(100.0, 1e9, Context())
