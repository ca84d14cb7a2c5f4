"""parse: turn the model's message into tool calls, a final answer, or a corrective turn.

The layered parser (`nodes.toolcalls`) decides what the text means; this node decides
what the cycle does about it within its budgets: calls go to dispatch (text-format calls
are attached to the assistant message as `tool_calls`, so every tool result follows its
call), empty output gets a nudge (at most `max_nudges`), malformed output (a broken
call, the call format's placeholders echoed back, tool-call markup the parser cannot
read) gets a corrective turn naming the valid tools and an ERROR event saying why, a
final answer that is not the structured reflection the run asks for (`reflection:
{format: json}`) gets a corrective turn naming what is wrong, and a cycle out of steps
closes, flagged.

Before any of that, a turn the model invented is cut off its answer, and a final answer
that was truncated or merely echoes the prompt is flagged (`nodes.answer_health`).
"""

from __future__ import annotations

import dataclasses
import time

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.runtime import Runtime

from contreact.checkpoints.persistence import Event, ParseFailure, keys
from contreact.extensions.loading import extensions_of
from contreact.graph.state import AgentState, Context, CycleStats, PendingCall, StateUpdate
from contreact.nodes.answer_health import (
    ECHO_FLAG,
    INVENTED_TURN_FLAG,
    TRUNCATED_FLAG,
    cut_invented_turn,
    is_echo,
)
from contreact.nodes.budgets import past_time_limit, steps_left
from contreact.nodes.prompts import system_text
from contreact.nodes.step import ledger_of, node
from contreact.nodes.storable import storable
from contreact.ollama.tool_mode import TEXT_MODES
from contreact.text.reflection_format import Accepted, check_reflection, correction
from contreact.text.toolcalls import (
    FinalAnswer,
    NoAnswer,
    ToolCalls,
    parse_response,
    server_parse_error,
)

# Reasons worth a CYCLE_END flag: the model wrote something that looks like a call but is
# not one, which a researcher comparing models wants to count.
_FLAGGED_REASONS = ("echoed_placeholder_call", "unreadable_markup")


def _record_failure(state: AgentState, ctx: Context, step: int, outcome: NoAnswer) -> list[str]:
    """Log why the answer got a corrective turn (ERROR); the cycle's flags with the reason."""
    kind = outcome.reason if outcome.reason != "empty" else "malformed_call"
    payload = ParseFailure(
        step=step, kind=kind, message=(outcome.detail.splitlines() or [""])[0][:300]
    )
    ledger_of(state, ctx).emit(Event(state.cycle, keys.parse_failure(state.cycle, step), payload))
    if outcome.reason in _FLAGGED_REASONS and outcome.reason not in state.flags:
        return [*state.flags, outcome.reason]
    return list(state.flags)


def _close(text: str, stats: CycleStats, *flags: str) -> StateUpdate:
    """End the cycle with `text` as its reflection; an empty one is flagged."""
    marks = list(flags)
    if not text:
        marks.append("empty_reflection")
    return {"outcome": "final", "final_text": text, "flags": marks, "pending": [], "stats": stats}


def _correct(feedback: str, message_id: str, stats: CycleStats) -> StateUpdate:
    """A corrective user turn after output that cannot be used; it counts as an error."""
    return {
        "outcome": "retry",
        "pending": [],
        "messages": [HumanMessage(content=feedback, id=message_id)],
        "stats": {**stats, "errors": stats["errors"] + 1},
    }


@node
def parse(state: AgentState, runtime: Runtime[Context]) -> StateUpdate:
    """Cut invented turns, route the answer, and flag a truncated or echoed reflection."""
    message = state.messages[-1] if state.messages else None
    found: list[str] = []
    if isinstance(message, AIMessage) and isinstance(message.content, str):
        cut = cut_invented_turn(message.content, state.cycle)
        if cut.marker is not None:
            # The model's own words end where its invented turn begins; the cut message
            # (same id) replaces the answer, so no later prompt shows the invention.
            message = message.model_copy(update={"content": cut.text})
            state = dataclasses.replace(state, messages=[*state.messages[:-1], message])
            found.append(INVENTED_TURN_FLAG)
    update = _route(state, runtime)
    if isinstance(message, AIMessage) and update.get("outcome") == "final":
        if message.response_metadata.get("done_reason") == "length":
            found.append(TRUNCATED_FLAG)
        text = str(update.get("final_text") or "")
        if text and is_echo(text, _echo_sources(state)):
            found.append(ECHO_FLAG)
    if not found or not isinstance(message, AIMessage):
        return update
    if INVENTED_TURN_FLAG in found and not any(
        getattr(m, "id", None) == message.id for m in update.get("messages", [])
    ):
        update["messages"] = [message, *update.get("messages", [])]
    flags = list(update.get("flags", state.flags))
    update["flags"] = flags + [f for f in found if f not in flags]
    return update


def _echo_sources(state: AgentState) -> list[str]:
    """What a reflection may not merely repeat: the system prompt and the cycle's earlier turns."""
    earlier = [m.content for m in state.messages[:-1] if isinstance(m.content, str)]
    system = system_text(
        [],
        task=state.task,
        text_tools=state.tool_mode in TEXT_MODES,
        constrained=state.tool_mode == "constrained",
    )
    return [system, *earlier]


def _route(state: AgentState, runtime: Runtime[Context]) -> StateUpdate:
    """Classify the last model message and route the cycle accordingly."""
    ctx = runtime.context
    message = state.messages[-1] if state.messages else None
    if not isinstance(message, AIMessage):
        raise RuntimeError(
            f"parse expects the model's message last, found {type(message).__name__}"
        )
    cycle, stats = state.cycle, state.stats
    step = stats["steps"] - 1
    server_error = message.response_metadata.get("server_parse_error")
    content = message.content if isinstance(message.content, str) else str(message.content)
    schemas = extensions_of(ctx).toolset.parameter_schemas
    outcome = (
        server_parse_error(str(server_error), schemas)
        if server_error
        else parse_response(content, message.tool_calls, schemas)
    )
    more_steps = steps_left(stats, ctx)
    budget_flag = "time_budget_exhausted" if stats["out_of_time"] else "step_budget_exhausted"
    if not stats["out_of_time"] and past_time_limit(state.cycle_started, time.time(), ctx):
        # Calls made in time still run; the next model call gets no tools and closes the cycle.
        stats = {**stats, "out_of_time": True}

    if isinstance(outcome, FinalAnswer):
        schema = ctx.reflection_schema
        checked = check_reflection(outcome.text, schema) if schema is not None else None
        if checked is None or isinstance(checked, Accepted):
            text = checked.text if checked else outcome.text
            return {"outcome": "final", "final_text": text, "pending": [], "stats": stats}
        if more_steps:
            return _correct(correction(checked.problem), f"c{cycle}-s{step}-fix", stats)
        # Out of steps: the note is kept as the model wrote it, flagged, without fields.
        return _close(outcome.text, stats, "reflection_invalid", budget_flag)

    if isinstance(outcome, ToolCalls):
        if not more_steps:
            return _close(outcome.text, stats, budget_flag)
        pending, converted = [], False
        for i, c in enumerate(outcome.calls):
            # Arguments decoded from text may hold what a checkpoint cannot (a 401-digit int).
            args, changed = storable(c.args)
            converted = converted or changed
            pending.append(
                PendingCall(id=keys.call_id(cycle, step, i), name=c.name, args=args, error=c.error)
            )
        update: StateUpdate = {"outcome": "calls", "pending": pending, "stats": stats}
        if converted and "values_kept_as_text" not in state.flags:
            update["flags"] = [*state.flags, "values_kept_as_text"]
        if outcome.layer != "native":
            attached = [
                {"name": p["name"], "args": p["args"], "id": p["id"], "type": "tool_call"}
                for p in pending
            ]
            update["messages"] = [message.model_copy(update={"tool_calls": attached})]
        return update

    assert isinstance(outcome, NoAnswer)
    if outcome.kind == "empty":
        if stats["nudges"] < ctx.limits.max_nudges and more_steps:
            return {
                "outcome": "retry",
                "pending": [],
                "messages": [HumanMessage(content=outcome.feedback, id=f"c{cycle}-s{step}-nudge")],
                "stats": {**stats, "nudges": stats["nudges"] + 1},
            }
        return _close("", stats, "nudges_exhausted" if more_steps else budget_flag)
    flags = _record_failure(state, ctx, step, outcome)
    if more_steps:
        return {**_correct(outcome.feedback, f"c{cycle}-s{step}-fix", stats), "flags": flags}
    return _close("", stats, *flags, "malformed_output", budget_flag)
