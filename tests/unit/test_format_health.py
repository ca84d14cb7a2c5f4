"""The report's format-health counts, read from events as the engine writes them."""

from __future__ import annotations

from typing import Any

from contreact.analysis.format_health import FormatHealth, run_health


def event(event_type: str, **payload: Any) -> dict[str, Any]:
    return {"event_type": event_type, "cycle_number": 1, "payload": payload}


def test_counts_per_answer_and_per_cycle() -> None:
    events = [
        event("LLM_INVOCATION", done_reason="length", flags=["truncated", "invented_turn"]),
        event("ERROR", kind="unreadable_markup"),
        event("LLM_INVOCATION", done_reason="stop", flags=[]),
        event("TOOL_CALL", tool_name="write"),
        event("LLM_INVOCATION", done_reason="length", flags=["truncated"]),
        event("ERROR", kind="echoed_placeholder_call"),
        event("ERROR", kind="unreadable_markup"),
        event("CYCLE_END", flags=["truncated", "echoed_prompt", "unreadable_markup"]),
        event("CYCLE_END", flags=["echoed_placeholder_call"]),
    ]
    health = run_health("gemma3:270m", events)
    assert health == FormatHealth(
        model="gemma3:270m",
        runs=1,
        steps=3,
        calls_parsed=1,
        unreadable_markup=2,  # per answer (ERROR events), not per flagged cycle
        placeholder_calls=1,
        truncations=2,
        echoes=1,
        invented_turns=1,
    )
    # Where the parser logs no ERROR for a reason, flagged cycles count.
    flagged_only = [e for e in events if e["event_type"] != "ERROR"]
    assert run_health("m", flagged_only).unreadable_markup == 1
    assert (health + health).line() == (
        "gemma3:270m (2 runs): 6 steps, 2 calls parsed, 4 unreadable markup, "
        "2 echoed placeholder calls, 4 truncations, 2 echoes, 2 invented turns"
    )
