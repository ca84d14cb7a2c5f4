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
    kept: str = ""
    """Which whole cycles were sent when some were left out, in words (see `fit_history`);
    empty when none were (and in ratings stored before the rule existed)."""

    @property
    def anything(self) -> bool:
        """Whether anything was left out."""
        return bool(self.steps_of_cycles or self.cycles)

    def describe(self) -> str:
        """One line for tables: what was left out, or that the whole history was sent."""
        parts = []
        if self.steps_of_cycles:
            parts.append(f"steps of cycles {_spans(self.steps_of_cycles, SHOWN_SPANS)}")
        if self.cycles:
            parts.append(f"cycles {_spans(self.cycles, SHOWN_SPANS)} entirely")
            if self.kept:
                parts[-1] += f" (sent: {self.kept})"
        if not parts:
            return f"whole history (~{self.tokens} of {self.budget} tokens)"
        return f"left out: {'; '.join(parts)} (~{self.tokens} of {self.budget} tokens)"


SHOWN_SPANS = 4
"""Runs of cycle numbers a one-line description names before it counts the rest."""


def _spans(numbers: Sequence[int], most: int | None = None) -> str:
    spans: list[str] = []
    for n in sorted(numbers):
        if spans and spans[-1].split("-")[-1] == str(n - 1):
            spans[-1] = f"{spans[-1].split('-')[0]}-{n}"
        else:
            spans.append(str(n))
    if most is not None and len(spans) > most:
        return ", ".join(spans[: most - 1]) + f", ... {spans[-1]}"
    return ", ".join(spans)


FIRST_CYCLES = 3
"""Whole cycles kept from the start of a history too long to send whole: how it began."""


def fit_history(
    history: History, instrument: str, num_ctx: int
) -> tuple[list[BaseMessage], Omitted]:
    """The messages to send (system, history, instrument) within `num_ctx`, and what was left out.

    The rule, in this order until the estimate fits `num_ctx` minus the answer reserve:

    1. the working steps (tool calls, results, corrective turns) of the oldest cycles,
       keeping each cycle's opening turn and reflection;
    2. then whole cycles. The last cycle always stays, then the first `FIRST_CYCLES`
       (while they fit), then the newest cycles, newest first, in half of what is left,
       and from the cycles between, an evenly spaced sample in the rest: the evaluator
       reads how the life began, how it went on, and where it ended.

    The system prompt and the instrument always stay. Each message's tokens are
    estimated once, so a 10,000-cycle history is fitted in time linear in its length.
    """
    budget = max(0, num_ctx - ANSWER_RESERVE_TOKENS)
    system = SystemMessage(history.system)
    question = HumanMessage(instrument)
    cycles = history.cycles

    def cost(messages: Sequence[BaseMessage]) -> int:
        return sum(message_tokens(m) for m in messages)

    bare = [cost(c.opening) + cost(c.final) for c in cycles]
    steps = [cost(c.steps) for c in cycles]
    fixed = message_tokens(system) + message_tokens(question)
    tokens = fixed + sum(bare) + sum(steps)
    no_steps: set[int] = set()
    for i, c in enumerate(cycles):
        if tokens <= budget:
            break
        if c.steps:
            no_steps.add(c.cycle)
            tokens -= steps[i]
    sent: Sequence[int] = range(len(cycles))
    kept = ""
    if tokens > budget and cycles:
        # Every step is left out by now: what is left to choose is whole cycles.
        chosen = _sample(bare, budget - fixed)
        sent = sorted(chosen.indices)
        kept = chosen.describe()
        tokens = fixed + sum(bare[i] for i in sent)
    messages: list[BaseMessage] = [system]
    for i in sent:
        c = cycles[i]
        messages += c.opening
        if c.cycle not in no_steps:
            messages += c.steps
        messages += c.final
    messages.append(question)
    kept_cycles = {cycles[i].cycle for i in sent}
    dropped = sorted(c.cycle for c in cycles if c.cycle not in kept_cycles)
    return messages, Omitted(sorted(no_steps & kept_cycles), dropped, tokens, budget, kept)


@dataclass(frozen=True)
class _Chosen:
    """The whole cycles sent of a history too long for its budget (indices into it)."""

    indices: set[int]
    first: int
    middle: int
    middle_of: int
    last: int

    def describe(self) -> str:
        parts = []
        if self.first:
            parts.append(f"first {self.first}")
        if self.middle:
            parts.append(f"{self.middle} of the {self.middle_of} between, evenly spaced")
        parts.append(f"last {self.last}" if self.last > 1 else "the last")
        return " + ".join(parts)


def _sample(costs: Sequence[int], room: int) -> _Chosen:
    """Which whole cycles (by index, `costs` their tokens) fit `room`: see `fit_history`."""
    n = len(costs)
    chosen = {n - 1}
    room -= costs[n - 1]
    first = 0
    while first < min(FIRST_CYCLES, n - 1) and costs[first] <= room:
        chosen.add(first)
        room -= costs[first]
        first += 1
    recent = room // 2
    start = n - 1  # the oldest of the newest cycles kept
    while start - 1 >= first and costs[start - 1] <= recent:
        start -= 1
        chosen.add(start)
        recent -= costs[start]
        room -= costs[start]
    between = range(first, start)
    middle = 0
    if between and room > 0:
        mean = sum(costs[i] for i in between) / len(between)
        wanted = min(len(between), max(1, int(room // max(mean, 1))))
        for j in range(wanted):
            i = between[int((j + 0.5) * len(between) / wanted)]
            if costs[i] <= room:
                chosen.add(i)
                room -= costs[i]
                middle += 1
    return _Chosen(chosen, first, middle, len(between), n - start)
