"""invoke: one model call through ChatOllama, journaled so a crash never repeats it.

The call's result is recorded with its LLM_INVOCATION event before the node returns; if
the process dies before the checkpoint, the re-run node reads the recorded answer instead
of asking the model again, so state, log and memory cannot disagree. Tools are bound
unless the cycle's budget withdrew them, which forces a final answer.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langgraph.runtime import Runtime

from contreact.checkpoints.persistence import Error, Event, Ledger, LlmInvocation, Unit, keys
from contreact.extensions.loading import extensions_of
from contreact.graph.state import AgentState, Context, CycleStats, StateUpdate
from contreact.nodes.answer_health import answer_flags
from contreact.nodes.budgets import tools_offered
from contreact.nodes.constrained_format import answer_schema
from contreact.nodes.notes import notes_for_prompt, prompt_of
from contreact.nodes.step import ledger_of, node
from contreact.nodes.storable import storable
from contreact.ollama.client import (
    ModelCallError,
    RetryPolicy,
    chat_client,
    classify,
    is_empty_stream,
    is_server_tool_parse_error,
    with_retries,
    within_deadline,
)
from contreact.ollama.server_numbers import added, checked_fields, dropped_on_this_call
from contreact.ollama.tool_mode import TEXT_MODES, is_no_tools_error
from contreact.tools.registry import BUILTIN_TOOLSET, Toolset

log = logging.getLogger("contreact")


def wire_message(message: BaseMessage) -> dict[str, Any]:
    """A message as logged, with Ollama's role names: content, tool calls, the call it answers."""
    role = {"human": "user", "ai": "assistant"}.get(message.type, message.type)
    out: dict[str, Any] = {"role": role, "content": message.content}
    calls = getattr(message, "tool_calls", None)
    if calls:
        out["tool_calls"] = [
            {"id": c.get("id"), "name": c["name"], "args": c["args"]} for c in calls
        ]
    call_id = getattr(message, "tool_call_id", None)
    if call_id:
        out["tool_call_id"] = call_id
    return out


def logged_messages(
    prompt: Sequence[BaseMessage], step: int, cycle: int, first_note: int
) -> list[dict[str, Any]]:
    """The messages an LLM_INVOCATION logs: what this call sends that the previous did not.

    A cycle's system message repeats every earlier reflection, each already logged in its
    own CYCLE_END; copying it into every cycle's log would grow the log quadratically. So
    it is logged whole in cycle 1 and later by reference: its size and hash, and which
    cycles' notes it holds (with the advisory, the rest is the run's cycle-1 prompt).
    """
    logged = []
    for message in new_since_last_call(prompt, step):
        if isinstance(message, SystemMessage) and cycle > 1:
            text = str(message.content)
            logged.append(
                {
                    "role": "system",
                    "chars": len(text),
                    "sha256": hashlib.sha256(text.encode()).hexdigest(),
                    "notes_of_cycles": [first_note, cycle - 1] if first_note < cycle else [],
                }
            )
        else:
            logged.append(wire_message(message))
    return logged


def new_since_last_call(prompt: Sequence[BaseMessage], step: int) -> list[BaseMessage]:
    """What this call sends that the previous one did not (all of it on a cycle's first step)."""
    if step == 0:
        return list(prompt)
    last_ai = max((i for i, m in enumerate(prompt) if isinstance(m, AIMessage)), default=0)
    return list(prompt[last_ai + 1 :])


@lru_cache(maxsize=64)
def _client(
    model: str,
    host: str,
    timeout_s: float,
    keep_alive: str,
    reasoning: bool | str | None,
    tools: str | None,
) -> Any:
    """The ChatOllama for these settings, with the tool schemas (`tools`, JSON) bound.

    Kept per process: converting the schemas on every call cost more than the rest of the
    request's set-up.
    """
    client = chat_client(model, host, timeout_s, keep_alive, reasoning)
    return client.bind_tools(json.loads(tools)) if tools else client


def call_model(
    ctx: Context,
    prompt: list[BaseMessage],
    with_tools: bool,
    *,
    may_switch: bool = False,
    toolset: Toolset = BUILTIN_TOOLSET,
    answer_format: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One model call with retries; its record.

    With `may_switch` (an `auto` run still on native tools), Ollama's 400 "does not
    support tools" is not a failure: the record says `no_tools` and the caller retries
    the call in text-tool mode. `answer_format` is sent as Ollama's `format` (the JSON
    schema of constrained mode).
    """
    runnable: Any
    if ctx.chat_model is not None:
        runnable = ctx.chat_model.bind_tools(toolset.schemas) if with_tools else ctx.chat_model
    else:
        ollama = ctx.ollama
        bound = toolset.schemas_json if with_tools else None
        runnable = _client(
            ctx.model, ctx.host, ollama.timeout_s, ollama.keep_alive, ollama.reasoning, bound
        )

    sent_format = {"format": answer_format} if answer_format is not None else {}

    def once() -> dict[str, Any]:
        started = time.monotonic()
        try:
            with dropped_on_this_call() as dropped:
                reply = within_deadline(
                    lambda: runnable.invoke(prompt, options=ctx.sent_options, **sent_format),
                    ctx.ollama.timeout_s,
                    model=ctx.model,
                    host=ctx.host,
                )
        except Exception as exc:
            if may_switch and with_tools and is_no_tools_error(exc):
                return {"no_tools": str(getattr(exc, "error", exc))}
            # Not server faults: the model's output was unusable. The parse node turns
            # these into a corrective turn or a nudge instead of a failed run.
            if is_server_tool_parse_error(exc):
                return {"content": "", "tool_calls": [], "server_parse_error": str(exc)}
            if is_empty_stream(exc):
                return {"content": "", "tool_calls": [], "done_reason": "load"}
            raise
        meta = reply.response_metadata or {}
        if ctx.chat_model is None and meta.get("done") is not True:
            # The stream ended without Ollama's last line: the answer may be cut short.
            raise ModelCallError(
                "connection",
                f"the answer from Ollama at {ctx.host} ended before its `done` line",
            )
        # Server numbers as the client handed them on, checked again (a chat model given
        # in-process has no stream to check); refused ones are absent and named.
        numbers, refused = checked_fields(meta, ("prompt_eval_count", "eval_count"))
        dropped.extend(name for name in refused if name not in dropped)
        return {
            "content": reply.content if isinstance(reply.content, str) else str(reply.content),
            "tool_calls": [{"name": c["name"], "args": c["args"]} for c in reply.tool_calls],
            "thinking": reply.additional_kwargs.get("reasoning_content", ""),
            "done_reason": meta.get("done_reason"),
            "tokens_in": numbers["prompt_eval_count"],
            "tokens_out": numbers["eval_count"],
            "dropped_fields": sorted(dropped),
            "seconds": round(time.monotonic() - started, 4),
            # The id the answer streamed under: the stored message keeps it, so a client
            # keyed by id (Studio) shows one answer, not the stream and the state apart.
            "message_id": reply.id,
        }

    policy = RetryPolicy(retries=ctx.ollama.retries, budget_s=ctx.ollama.retry_budget_s)

    def on_retry(attempt: int, error: ModelCallError, wait: float) -> None:
        # Shown under --debug only, with the client's exception class for a bug report.
        log.warning(
            "%s [%s]; retry %d/%d in %.1f s",
            error.message,
            error.cause,
            attempt,
            ctx.ollama.retries,
            wait,
        )

    result, failures = with_retries(
        once,
        policy,
        lambda exc: classify(exc, model=ctx.model, host=ctx.host, timeout_s=ctx.ollama.timeout_s),
        on_retry,
    )
    result["retries"] = failures
    return result


def generated_chars(record: dict[str, Any]) -> int:
    """All text the model generated in one answer: content, thinking and tool-call arguments.

    Arguments count as their JSON (`json.dumps(args, ensure_ascii=False)`), the form the
    model wrote them in; the paper's "response chars" is every character of the response.
    """
    calls = record.get("tool_calls") or []
    return (
        len(record.get("content") or "")
        + len(record.get("thinking") or "")
        + sum(len(json.dumps(c.get("args") or {}, ensure_ascii=False)) for c in calls)
    )


def ai_message(record: dict[str, Any], cycle: int, step: int) -> AIMessage:
    """The AIMessage a recorded call stands for, with ids fixed by cycle and step."""
    calls = [
        {
            "name": c["name"],
            "args": c["args"],
            "id": keys.call_id(cycle, step, i),
            "type": "tool_call",
        }
        for i, c in enumerate(record.get("tool_calls") or [])
    ]
    metadata = {k: record[k] for k in ("done_reason", "server_parse_error") if record.get(k)}
    return AIMessage(
        content=record.get("content") or "",
        tool_calls=calls,
        id=record.get("message_id") or keys.ai_message_id(cycle, step),
        response_metadata=metadata,
    )


@node
def invoke(state: AgentState, runtime: Runtime[Context]) -> StateUpdate:
    """Call the model on the assembled prompt (or replay the journaled answer)."""
    ctx = runtime.context
    ledger = ledger_of(state, ctx)
    cycle, step_no = state.cycle, state.stats["steps"]
    key = keys.model_call(cycle, step_no)

    extensions = extensions_of(ctx)

    def act(_unit: Unit) -> tuple[dict[str, Any], list[Event]]:
        # Inside the journaled call: a replayed answer does not call the hooks again.
        extensions.call("before_model_call", {"cycle": cycle, "step": step_no, "model": ctx.model})
        record, payload = _call_and_log(state, ctx, ledger)
        extensions.call(
            "after_model_call",
            {
                "cycle": cycle,
                "step": step_no,
                "content": record.get("content") or "",
                "tool_calls": record.get("tool_calls") or [],
            },
        )
        return record, [Event(cycle, key, payload)]

    def use(record: dict[str, Any]) -> StateUpdate:
        update: StateUpdate = {}
        if record.get("tool_mode") and record["tool_mode"] != state.tool_mode:
            update["tool_mode"] = record["tool_mode"]
        message = ai_message(record, cycle, step_no)
        return {**update, "messages": [message], "stats": stats_after(state.stats, record)}

    # A recorded answer that cannot be used would fail every resume the same way: it is
    # named, and `resume --skip-bad-record` takes an empty answer instead (parse nudges).
    return ledger.used(
        key, cycle, ledger.once(key, cycle, act), use, SKIPPED_ANSWER.copy, SKIPPED_BECOMES
    )


SKIPPED_ANSWER: dict[str, Any] = {"content": "", "tool_calls": [], "skipped_record": True}
"""What a skipped model answer becomes: an empty answer, which the parse node nudges."""
SKIPPED_BECOMES = "an empty model answer (the model is nudged to answer again)"


def stats_after(stats: CycleStats, record: dict[str, Any]) -> CycleStats:
    """The cycle's counters once the answer `record` (new or journaled) is counted.

    Recorded numbers are read through the server-number check: a journal written before
    it may hold a 401-digit count (kept as its digits, a string) or a negative one.
    """
    return {
        **stats,
        "steps": stats["steps"] + 1,
        "tokens_in": int(added(stats["tokens_in"], record.get("tokens_in"))),
        "tokens_out": int(added(stats["tokens_out"], record.get("tokens_out"))),
        "model_seconds": round(added(stats["model_seconds"], record.get("seconds")), 4),
        "response_chars": stats["response_chars"] + generated_chars(record),
    }


def _call_and_log(
    state: AgentState, ctx: Context, ledger: Ledger
) -> tuple[dict[str, Any], LlmInvocation]:
    """Call the model; its record and LLM_INVOCATION payload (a failure is logged as ERROR)."""
    cycle, step_no = state.cycle, state.stats["steps"]
    earlier = notes_for_prompt(ctx, ledger, cycle, since=state.reflections_from)
    mode = state.tool_mode or "native"
    toolset = extensions_of(ctx).toolset
    schemas = toolset.schemas

    def prompt_in(mode: str) -> list[BaseMessage]:
        # The prompt assemble built for this step, sent as it is.
        return prompt_of(
            state,
            earlier,
            text_tools=mode in TEXT_MODES,
            constrained=mode == "constrained",
            reflection_schema=ctx.reflection_schema,
            tool_schemas=schemas,
        )

    prompt = prompt_in(mode)
    offered = tools_offered(state.stats, ctx)
    with_tools = mode == "native" and offered
    # Constrained mode: the grammar admits a call only while tools are offered.
    answer_format = (
        answer_schema(schemas, ctx.reflection_schema, tools=offered)
        if mode == "constrained"
        else None
    )
    switched = None
    try:
        record = call_model(
            ctx,
            prompt,
            with_tools,
            may_switch=ctx.tools.mode == "auto",
            toolset=toolset,
            answer_format=answer_format,
        )
        if "no_tools" in record:
            # The model cannot take native tools: from now on this run uses text tools.
            switched, mode, with_tools = record["no_tools"], "text", False
            prompt = prompt_in(mode)
            record = call_model(ctx, prompt, with_tools, toolset=toolset)
    except ModelCallError as error:
        prefix = keys.model_error_prefix(cycle, step_no)
        n = ledger.count_events(key_prefix=prefix, cycle=cycle)
        ledger.emit(
            Event(
                cycle,
                keys.model_error(cycle, step_no, n),
                Error(
                    step=step_no,
                    kind=error.kind,
                    message=error.message,
                    attempts=error.attempts,
                    model=ctx.model,
                    host=ctx.host,
                ),
            )
        )
        raise
    # What the model sent may not fit a checkpoint or a database row as is (a 401-digit
    # integer in a tool call, a lone surrogate): kept as text, and the event says so.
    record, converted = storable(record)
    record["tools_offered"] = with_tools or answer_format is not None and offered
    record["tool_mode"] = mode
    payload = LlmInvocation(
        step=step_no,
        new_messages=logged_messages(prompt, step_no, cycle, state.reflections_from),
        response={
            "content": record["content"],
            "tool_calls": record["tool_calls"],
            "thinking": record.get("thinking") or "",
        },
        tokens_in=record.get("tokens_in"),
        tokens_out=record.get("tokens_out"),
        duration_s=record.get("seconds", 0.0),
        dropped_fields=record.get("dropped_fields") or [],
        done_reason=record.get("done_reason"),
        flags=answer_flags(record, cycle),
        server_parse_error=record.get("server_parse_error"),
        retries=record["retries"],
        switched_to_text_tools=switched,
        kept_as_text=converted,
        options={
            "model": ctx.model,
            "host": ctx.host,
            "tools_offered": record["tools_offered"],
            "tool_mode": mode,
            "think": ctx.ollama.reasoning,
            "keep_alive": ctx.ollama.keep_alive,
            **ctx.sent_options,
        },
    )
    return record, payload
