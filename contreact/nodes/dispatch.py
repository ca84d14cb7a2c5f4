"""dispatch: run the parsed calls in order and answer each with one tool result.

Every call counts against the cycle's tool budget, refused and invalid ones too. A call
the parser rejected, a call over budget and the third identical call are answered with
corrective text instead of being run. Each call is journaled under a key built from
(cycle, step, call index), in the transaction that applies its memory change, so a crash
between here and the next checkpoint neither loses nor doubles a write.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage
from langgraph.errors import GraphBubbleUp
from langgraph.runtime import Runtime

from contreact.checkpoints.persistence import (
    Error,
    Event,
    HookAction,
    Ledger,
    OperatorMessage,
    ToolCall,
    Unit,
    keys,
)
from contreact.checkpoints.persistence import Intervention as InterventionEvent
from contreact.extensions.hooks import HookError, tool_call_info
from contreact.extensions.interventions import applying
from contreact.extensions.loading import Extensions, extensions_of
from contreact.graph.state import AgentState, Context, CycleStats, PendingCall, StateUpdate
from contreact.nodes.budgets import refusal, truncate_output
from contreact.nodes.step import ledger_of, node
from contreact.text.toolcalls import ParsedCall, call_signature
from contreact.tools.memory import ToolSession
from contreact.tools.operator import ask_operator
from contreact.tools.registry import MEMORY_TOOLS, OPERATOR_TOOL, ToolResult

SKIPPED_RESULT: dict[str, Any] = {
    "output": "error: this call's recorded result could not be replayed; call it again if needed",
    "error": True,
    "ran": False,
}
"""What a skipped tool result becomes: a failed call the model is told about."""
SKIPPED_BECOMES = "a failed tool call (the model is told its result could not be replayed)"


def _counted(
    stats: CycleStats, call: PendingCall, repeated: bool, result: dict[str, Any]
) -> tuple[CycleStats, ToolMessage]:
    """What a call's (recorded) result makes of the counters, and the model's reply."""
    reply = ToolMessage(
        content=result["output"],
        tool_call_id=call["id"],
        name=call["name"],
        id=f"{call['id']}-result",
        status="error" if result["error"] else "success",
    )
    return _tally(stats, call, result, repeated=repeated), reply


def _tally(
    stats: CycleStats, call: PendingCall, result: dict[str, Any], repeated: bool
) -> CycleStats:
    name, ran, failed = call["name"], bool(result["ran"]), bool(result["error"])
    by_name = dict(stats["tool_calls_by_name"])
    by_name[name] = by_name.get(name, 0) + 1
    memory_op = ran and name in MEMORY_TOOLS
    wrote = memory_op and name == "write" and not failed
    return {
        **stats,
        "tool_calls": stats["tool_calls"] + 1,
        "tool_calls_by_name": by_name,
        "errors": stats["errors"] + int(failed),
        "repeated_calls": stats["repeated_calls"] + int(repeated),
        "memory_ops_total": stats["memory_ops_total"] + int(memory_op),
        "memory_write_chars": stats["memory_write_chars"]
        + (len(str(call["args"].get("value", ""))) if wrote else 0),
        "messages_to_operator": stats["messages_to_operator"]
        + int(ran and name == OPERATOR_TOOL and not failed),
    }


@dataclass
class _AsRun:
    """The call as it runs: the model's, or a before-tool hook's rewrite of its arguments."""

    call: PendingCall
    model_args: dict[str, Any] | None = None
    """The model's arguments, when hooks rewrote them."""
    rewritten_by: list[str] = field(default_factory=list)


def _run_call(
    ledger: Ledger,
    ctx: Context,
    cycle: int,
    step: int,
    index: int,
    call: PendingCall,
    refused: str | None,
) -> dict[str, Any]:
    """Run (or refuse) one call exactly once, inside the journal transaction that records it.

    A recorded operator call is not asked again, but still passes its interrupt, so that
    later operator calls in the same message are paired with their own replies.
    """
    key = keys.tool_call(cycle, step, index)
    extensions = extensions_of(ctx)
    as_run = _AsRun(call)

    def act(unit: Unit) -> tuple[dict[str, Any], list[Event]]:
        started = time.monotonic()
        session = ToolSession(
            run_id=ledger.run_id,
            memory=unit.memory,
            memory_value_chars=ctx.limits.memory_value_chars,
            cycle=cycle,
            key=f"{ledger.run_id}:{key}",
        )
        batch: list[Event] = []
        if refused:
            outcome, ran = ToolResult(refused, True), False
        else:
            outcome, ran = _run_extended(
                extensions, ctx, session, (cycle, step, index), as_run, batch
            )
        output = truncate_output(outcome.output, ctx.limits.tool_output_chars)
        batch.insert(
            0,
            _tool_event(
                cycle,
                step,
                key,
                as_run,
                output,
                outcome.error,
                refused is not None,
                truncated=output != outcome.output,
                seconds=time.monotonic() - started,
            ),
        )
        if session.details:
            waited = unit.seconds_since(keys.model_call(cycle, step))
            batch.append(
                Event(
                    cycle,
                    keys.operator_message(cycle, step, index),
                    OperatorMessage(step=step, wait_s=waited, **session.details),
                )
            )
        return {"output": output, "error": outcome.error, "ran": ran}, batch

    def ask_again(_recorded: dict[str, Any]) -> None:
        if call["name"] == OPERATOR_TOOL and refused is None:
            ask_operator(ledger.run_id, cycle, str(call["args"].get("message", "")))

    try:
        return ledger.once(key, cycle, act, replayed=ask_again)
    except (GraphBubbleUp, HookError):
        raise
    except Exception as exc:  # noqa: BLE001 - reported to the model and logged as ERROR
        # The tool's transaction rolled back, so nothing it did persists; record the failure
        # so the model hears about it and the run goes on.
        return ledger.commit(key, cycle, _failure(cycle, step, index, as_run, exc))


def _run_extended(
    extensions: Extensions,
    ctx: Context,
    session: ToolSession,
    where: tuple[int, int, int],
    as_run: _AsRun,
    batch: list[Event],
) -> tuple[ToolResult, bool]:
    """Run a call past the hooks and interventions: (its result, whether the tool ran).

    A before-tool hook may veto the call (not run; the model is told why) or change its
    arguments (run so; the model is told, and `as_run` keeps both); a `tool_fails`
    intervention answers the call with its error instead of running it. Each adds its
    event to `batch`.
    """
    cycle, step, index = where
    call = as_run.call
    name = call["name"]
    info = tool_call_info(cycle, step, index, name, call["args"], session.key)
    decision = extensions.before_tool_call(info)
    note = ""
    if decision.rewritten_by and decision.args != call["args"]:
        batch.append(
            Event(
                cycle,
                keys.tool_hook(cycle, step, index, "rewrite"),
                HookAction(
                    step=step,
                    action="rewrite",
                    hook=", ".join(decision.rewritten_by),
                    tool_name=name,
                    parameters=call["args"],
                    rewritten=decision.args,
                ),
            )
        )
        shown = json.dumps(decision.args, ensure_ascii=False)
        note = f"(A hook changed this call's arguments to {shown}.) "
        as_run.model_args = dict(call["args"])
        as_run.rewritten_by = list(decision.rewritten_by)
        call = as_run.call = {**call, "args": decision.args}
    if decision.vetoed_by is not None:
        batch.append(
            Event(
                cycle,
                keys.tool_hook(cycle, step, index, "veto"),
                HookAction(
                    step=step,
                    action="veto",
                    hook=decision.vetoed_by,
                    tool_name=name,
                    parameters=call["args"],
                    reason=decision.reason,
                ),
            )
        )
        text = f"Error: this call of {name} was vetoed and did not run: {decision.reason}."
        return ToolResult(text, True), False
    failing = applying(ctx.interventions, cycle, "tool_fails")
    failing = [(i, x) for i, x in failing if x.tool_fails.tool == name]
    if failing:
        position, item = failing[0]
        error = item.tool_fails.error
        batch.append(
            Event(
                cycle,
                keys.tool_intervention(cycle, step, index),
                InterventionEvent(
                    index=position,
                    kind="tool_fails",
                    detail={"error": error},
                    step=step,
                    tool_name=name,
                ),
            )
        )
        return ToolResult(f"Error: {error}", True), False
    outcome = extensions.toolset.run(name, call["args"], session)
    if (how := outcome.contained) is not None:  # a `sys.exit`, a call past `tools.timeout_s`
        said = Error(step=step, kind=how.kind, message=how.said, tool_name=name)
        batch.append(Event(cycle, keys.tool_error(cycle, step, index), said))
    extensions.call(
        "after_tool_call",
        {**info, "args": call["args"], "output": outcome.output, "error": outcome.error},
    )
    return ToolResult(note + outcome.output, outcome.error), True


def _tool_event(
    cycle: int,
    step: int,
    key: str,
    as_run: _AsRun,
    output: str,
    error: bool,
    refused: bool,
    *,
    truncated: bool = False,
    seconds: float = 0.0,
) -> Event:
    """The TOOL_CALL event of one call: the arguments it ran with, and the model's if rewritten."""
    call = as_run.call
    return Event(
        cycle,
        key,
        ToolCall(
            step=step,
            call_id=call["id"],
            tool_name=call["name"],
            parameters=call["args"],
            output=output,
            error=error,
            refused=refused,
            truncated=truncated,
            duration_s=round(seconds, 4),
            model_parameters=as_run.model_args,
            rewritten_by=as_run.rewritten_by or None,
        ),
    )


def _failure(
    cycle: int, step: int, index: int, as_run: _AsRun, exc: Exception
) -> Callable[[Unit], tuple[dict[str, Any], list[Event]]]:
    """The journal entry and events of a tool that raised unexpectedly.

    When a hook rewrote the arguments, the error names the hook: the tool ran with its
    arguments, not the model's.
    """
    name = as_run.call["name"]
    reason = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else 'no detail'}"
    if as_run.rewritten_by:
        hooks = ", ".join(as_run.rewritten_by)
        reason += f" (with the arguments hook {hooks} rewrote)"
    output = f"Error: the tool {name} failed unexpectedly ({reason}). Nothing was changed."

    def act(_unit: Unit) -> tuple[dict[str, Any], list[Event]]:
        key = keys.tool_call(cycle, step, index)
        return {"output": output, "error": True, "ran": True}, [
            _tool_event(cycle, step, key, as_run, output, True, False),
            Event(
                cycle,
                keys.tool_error(cycle, step, index),
                Error(step=step, kind="tool_error", message=reason, tool_name=name),
            ),
        ]

    return act


@node
def dispatch(state: AgentState, runtime: Runtime[Context]) -> StateUpdate:
    """Run the pending calls; return one ToolMessage per call and the updated counters."""
    ctx = runtime.context
    ledger = ledger_of(state, ctx)
    last = state.messages[-1] if state.messages else None
    if not isinstance(last, AIMessage) or not state.pending:
        raise RuntimeError("dispatch expects pending calls from the model's last message")
    cycle, step = state.cycle, state.stats["steps"] - 1
    stats, counts = state.stats, dict(state.call_counts)
    replies: list[ToolMessage] = []

    for index, call in enumerate(state.pending):
        signature = call_signature(ParsedCall(name=call["name"], args=call["args"]))
        refused = None if call["error"] else refusal(signature, stats["tool_calls"], counts, ctx)
        refused_text = call["error"] or (refused.text if refused else None)
        repeated = refused is not None and refused.kind == "repeated"
        # A recorded result that cannot be used would fail every resume the same way: it
        # is named, and `resume --skip-bad-record` tells the model the call failed.
        result = _run_call(ledger, ctx, cycle, step, index, call, refused_text)
        stats, reply = ledger.used(
            keys.tool_call(cycle, step, index),
            cycle,
            result,
            partial(_counted, stats, call, repeated),
            SKIPPED_RESULT.copy,
            SKIPPED_BECOMES,
        )
        if call["error"] is None:
            counts[signature] = counts.get(signature, 0) + 1
        replies.append(reply)
    return {
        "messages": replies,
        "stats": stats,
        "call_counts": counts,
        "pending": [],
        "outcome": "",
    }
