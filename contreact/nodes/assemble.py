"""assemble: open the cycle if it has not started, and fit the next prompt into `num_ctx`.

`nodes.notes.prompt_of` builds the whole prompt of the next model call from the state (with
the section builders of `nodes.prompts`); `invoke` sends exactly that. This node decides what
the state holds when it is rendered. When the prompt would exceed `num_ctx`
minus the output reserve, the oldest turns of the current cycle go first (a tool-call
message and its results go together; the system message and the cycle's opening turn
stay), then the oldest reflections. Each trim is logged as CONTEXT_TRIM.
"""

from __future__ import annotations

import json
import time
from typing import Any

from langchain_core.messages import HumanMessage, RemoveMessage
from langgraph.runtime import Runtime

from contreact.checkpoints.persistence import (
    ContextTrim,
    CycleStart,
    Event,
    Ledger,
    RunStart,
    Unit,
    keys,
)
from contreact.checkpoints.persistence import Extensions as ExtensionsRecord
from contreact.checkpoints.persistence import Intervention as InterventionEvent
from contreact.extensions.interventions import applying
from contreact.extensions.loading import Extensions, extensions_of
from contreact.graph.state import AgentState, Context, StateUpdate
from contreact.nodes.budgets import tools_offered
from contreact.nodes.context_budget import fit_reflections, plan_trim
from contreact.nodes.notes import in_reach, notes_for_prompt
from contreact.nodes.prompts import OPERATOR_NOTE, opening_turn, system_text
from contreact.nodes.provenance import gather
from contreact.nodes.step import ledger_of, node
from contreact.ollama.tool_mode import TEXT_MODES, decide_tool_mode
from contreact.text.tokens import estimate_tokens
from contreact.tools.registry import TOOL_SCHEMAS

TOOLS_TOKENS = estimate_tokens(json.dumps(TOOL_SCHEMAS))
"""What the tool definitions cost in the prompt (Ollama renders them into it)."""


def run_start(
    ctx: Context, state: AgentState, tools: dict[str, Any] | None, record: dict[str, Any]
) -> RunStart:
    """The RUN_START of a run beginning with `state` under `ctx`, with its provenance."""
    return RunStart(
        model=ctx.model,
        host=ctx.host,
        last_cycle=state.last_cycle,
        task=state.task,
        options=ctx.sent_options,
        tools=tools,
        seed=ctx.sent_options.get("seed"),
        reasoning=ctx.ollama.reasoning,
        provenance=record,
    )


@node
def assemble(state: AgentState, runtime: Runtime[Context]) -> StateUpdate:
    """Open the cycle (first step) or trim the cycle to the context budget (later steps)."""
    ctx = runtime.context
    ledger = ledger_of(state, ctx)
    cycle = state.cycle
    update: StateUpdate = {}
    messages = list(state.messages)
    tool_mode, decided = state.tool_mode, None
    if not tool_mode:
        decided = ledger.once(
            keys.TOOL_MODE,
            cycle,
            lambda _unit: (
                decide_tool_mode(ctx.tools.mode, ctx.host, ctx.model, ctx.ollama.timeout_s),
                [],
            ),
        )
        tool_mode = update["tool_mode"] = decided["mode"]
    extensions = extensions_of(ctx)
    if not messages:
        text = state.opening or opening_turn(ctx.user_turn, cycle, state.task)
        text = _with_operator_messages(text, ctx, cycle)
        if cycle == 1:
            # A fork or an extension opens a later cycle; its record is the runner's.
            tools = decided

            def start(_unit: Unit) -> tuple[dict[str, Any], list[Event]]:
                record = gather(ctx, task=state.task)
                return record, [Event(cycle, keys.RUN_START, run_start(ctx, state, tools, record))]

            ledger.once(keys.RUN_START, cycle, start)
        ledger.emit(
            Event(
                cycle,
                keys.cycle_start(cycle),
                CycleStart(opening=text, advisory=state.advisory),
            )
        )
        _start_extensions(ledger, ctx, extensions, state)
        _apply_interventions(ledger, ctx, cycle)
        messages = [HumanMessage(content=text, id=f"c{cycle}-open")]
        update["messages"] = messages
        update["cycle_started"] = time.time()

    budget = ctx.num_ctx - ctx.limits.output_reserve_tokens
    tail, per_reflection = in_reach(notes_for_prompt(ctx, ledger, cycle), budget, bool(state.task))
    earlier = tail.notes
    text_tools = tool_mode in TEXT_MODES
    schemas = extensions.toolset.schemas
    fixed = estimate_tokens(
        system_text(
            [],
            advisory=state.advisory,
            task=state.task,
            text_tools=text_tools,
            constrained=tool_mode == "constrained",
            reflection_schema=ctx.reflection_schema,
            tool_schemas=schemas,
        )
    )
    if not text_tools and tools_offered(state.stats, ctx):
        fixed += TOOLS_TOKENS if schemas is TOOL_SCHEMAS else estimate_tokens(json.dumps(schemas))
    trim = plan_trim(messages, fixed + sum(per_reflection), budget)
    omitted = 0
    if not trim.fits:
        kept = trim.tokens_after - fixed - sum(per_reflection)
        omitted = fit_reflections(per_reflection, budget - fixed - kept)
    update["reflections_from"] = earlier[omitted].cycle if omitted < len(earlier) else cycle
    # What the prompt costs once both the turns and the oldest reflections are left out.
    tokens_after = trim.tokens_after - sum(per_reflection[:omitted])
    if trim.dropped or omitted:
        step = state.stats["steps"]
        ledger.emit(
            Event(
                cycle,
                keys.context_trim(cycle, step),
                ContextTrim(
                    step=step,
                    dropped_messages=len(trim.dropped),
                    reflections_omitted=omitted,
                    tokens_before=trim.tokens_before,
                    tokens_after=tokens_after,
                    budget=budget,
                    fits=tokens_after <= budget,
                ),
            )
        )
        if trim.dropped:
            update["messages"] = [RemoveMessage(id=str(messages[i].id)) for i in trim.dropped]
        update["stats"] = {**state.stats, "trims": state.stats["trims"] + 1}
    return update


def _with_operator_messages(text: str, ctx: Context, cycle: int) -> str:
    """The opening turn with this cycle's operator-message interventions after it.

    A function of the config and the cycle alone, so a replayed opening reads the same.
    """
    notes = [
        OPERATOR_NOTE.format(message=item.operator_message)
        for _, item in applying(ctx.interventions, cycle, "operator_message")
    ]
    return "\n\n".join([text, *notes])


def _start_extensions(
    ledger: Ledger, ctx: Context, extensions: Extensions, state: AgentState
) -> None:
    """Record the run's own tools and hooks (EXTENSIONS) and call `on_run_start`, once."""
    record = extensions.record
    if record is None:
        return
    cycle = state.cycle

    def act(_unit: Unit) -> tuple[None, list[Event]]:
        extensions.call(
            "on_run_start",
            {
                "run_id": ledger.run_id,
                "cycle": cycle,
                "model": ctx.model,
                "tools": extensions.toolset.names,
            },
        )
        return None, [Event(cycle, keys.EXTENSIONS, ExtensionsRecord(**record))]

    ledger.once(keys.EXTENSIONS, cycle, act)


def _apply_interventions(ledger: Ledger, ctx: Context, cycle: int) -> None:
    """Apply the interventions that act as `cycle` opens, each exactly once (journaled)."""
    for index, item in enumerate(ctx.interventions):
        if item.kind == "tool_fails" or not item.applies_to(cycle):
            continue

        def act(unit: Unit, index: int = index, item: Any = item) -> tuple[None, list[Event]]:
            detail: dict[str, Any]
            if item.kind == "memory":
                detail = {"clear": True, "deleted": unit.memory.clear()}
            else:
                detail = {"message": item.operator_message}
            payload = InterventionEvent(index=index, kind=item.kind, detail=detail)
            return None, [Event(cycle, keys.intervention(cycle, index), payload)]

        ledger.once(keys.intervention(cycle, index), cycle, act)
