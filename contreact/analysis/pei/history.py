"""A rated run's conversation, rebuilt from its event log and fitted to the evaluator's context.

The checkpointed state holds only the current cycle, so the history is rebuilt from the
run's LLM_INVOCATION events, in order, as the agent lived it (thinking left out). When it
does not fit `pei.num_ctx` minus an answer reserve, the working steps of the oldest
cycles go first, then whole cycles, oldest first; what was left out is recorded.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from sqlalchemy import Engine

from contreact.analysis.runs import events_of_type
from contreact.nodes.context_budget import message_tokens

ANSWER_RESERVE_TOKENS = 1024
"""Tokens of `pei.num_ctx` kept free for the evaluator's answer."""


@dataclass
class CycleTurns:
    """One cycle of a rated run, as the agent lived it."""

    cycle: int
    opening: list[BaseMessage] = field(default_factory=list)
    """The turns before the cycle's first model answer (its opening user turn)."""
    steps: list[BaseMessage] = field(default_factory=list)
    """Tool calls, tool results and corrective turns."""
    final: list[BaseMessage] = field(default_factory=list)
    """The answer that closed the cycle (its reflection)."""


@dataclass(frozen=True)
class History:
    """A run's conversation up to a cycle: the system prompt and every cycle's turns."""

    system: str
    cycles: list[CycleTurns]


def _message(logged: dict[str, Any]) -> BaseMessage | None:
    role, content = logged.get("role"), str(logged.get("content") or "")
    if role == "user":
        return HumanMessage(content)
    if role == "tool":
        return ToolMessage(content, tool_call_id=str(logged.get("tool_call_id") or ""))
    if role == "assistant":
        return AIMessage(content)
    return None


def run_history(engine: Engine, run_id: str, at_cycle: int) -> History:
    """The conversation of `run_id`'s cycles 1..`at_cycle`, rebuilt from its LLM_INVOCATIONs.

    Each invocation logs the messages new since the previous call and the answer; the
    system message is logged whole in cycle 1 (later by reference), and that text, the
    prompt before any reflection, is the history's system prompt.
    """
    system = ""
    cycles: dict[int, CycleTurns] = {}
    for cycle, _, payload in events_of_type(engine, run_id, ("LLM_INVOCATION",)):
        if cycle > at_cycle:
            continue
        turns = cycles.setdefault(cycle, CycleTurns(cycle))
        step = int(payload.get("step") or 0)
        for logged in payload.get("new_messages") or []:
            if logged.get("role") == "system":
                if not system and isinstance(logged.get("content"), str):
                    system = logged["content"]
                continue
            message = _message(logged)
            if message is not None:
                (turns.opening if step == 0 and not turns.final else turns.steps).append(message)
        response = payload.get("response") or {}
        calls = [
            {"name": c["name"], "args": c.get("args") or {}, "id": f"c{cycle}-s{step}-t{i}"}
            for i, c in enumerate(response.get("tool_calls") or [])
        ]
        answer = AIMessage(str(response.get("content") or ""), tool_calls=calls)
        turns.steps.extend(turns.final)
        turns.final = [answer]
    for turns in cycles.values():
        if turns.final and turns.final[0].tool_calls:  # type: ignore[attr-defined]
            # The cycle ended on a budget, not on an answer: its last call is a step too.
            turns.steps.extend(turns.final)
            turns.final = []
    return History(system, [cycles[c] for c in sorted(cycles)])


@dataclass(frozen=True)
class Omitted:
    """What of a history was left out to fit the evaluator's context."""

    steps_of_cycles: list[int]
    """Cycles whose working steps were left out (opening turn and reflection kept)."""
    cycles: list[int]
    """Cycles left out entirely."""
    tokens: int
    """The estimated prompt tokens of what was sent."""
    budget: int
    """`pei.num_ctx` minus the answer reserve."""

    @property
    def anything(self) -> bool:
        """Whether anything was left out."""
        return bool(self.steps_of_cycles or self.cycles)

    def describe(self) -> str:
        """One line for tables: what was left out, or that the whole history was sent."""
        parts = []
        if self.steps_of_cycles:
            parts.append(f"steps of cycles {_spans(self.steps_of_cycles)}")
        if self.cycles:
            parts.append(f"cycles {_spans(self.cycles)} entirely")
        if not parts:
            return f"whole history (~{self.tokens} of {self.budget} tokens)"
        return f"left out: {'; '.join(parts)} (~{self.tokens} of {self.budget} tokens)"


def _spans(numbers: Sequence[int]) -> str:
    spans: list[str] = []
    for n in sorted(numbers):
        if spans and spans[-1].split("-")[-1] == str(n - 1):
            spans[-1] = f"{spans[-1].split('-')[0]}-{n}"
        else:
            spans.append(str(n))
    return ", ".join(spans)


def fit_history(
    history: History, instrument: str, num_ctx: int
) -> tuple[list[BaseMessage], Omitted]:
    """The messages to send (system, history, instrument) within `num_ctx`, and what was left out.

    The rule (see the module docstring): working steps of the oldest cycles first, then
    whole cycles oldest first; the system prompt, the instrument and the last cycle's
    reflection always stay.
    """
    budget = max(0, num_ctx - ANSWER_RESERVE_TOKENS)
    system = SystemMessage(history.system)
    question = HumanMessage(instrument)
    cycles = history.cycles
    cost = {id(m): message_tokens(m) for c in cycles for m in (*c.opening, *c.steps, *c.final)}
    fixed = message_tokens(system) + message_tokens(question)
    no_steps: set[int] = set()
    dropped: set[int] = set()

    def total() -> int:
        tokens = fixed
        for c in cycles:
            if c.cycle in dropped:
                continue
            kept = (
                [*c.opening, *c.final] if c.cycle in no_steps else [*c.opening, *c.steps, *c.final]
            )
            tokens += sum(cost[id(m)] for m in kept)
        return tokens

    tokens = total()
    for c in cycles:
        if tokens <= budget:
            break
        if c.steps:
            no_steps.add(c.cycle)
            tokens = total()
    for c in cycles[:-1]:
        if tokens <= budget:
            break
        dropped.add(c.cycle)
        tokens = total()
    messages: list[BaseMessage] = [system]
    for c in cycles:
        if c.cycle in dropped:
            continue
        messages += c.opening
        if c.cycle not in no_steps:
            messages += c.steps
        messages += c.final
    messages.append(question)
    return messages, Omitted(sorted(no_steps - dropped), sorted(dropped), tokens, budget)
