"""The next model call's prompt, a pure function of state, and the earlier notes it can show.

`prompt_of` builds the whole prompt from the checkpointed state and the finished cycles'
notes (rows that never change), so a call replayed after a resume is sent byte for byte as
before; `assemble` decides what the state holds and `invoke` sends exactly this. Only the
notes within reach of the context window are ever read, whatever the length of the run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from langchain_core.messages import BaseMessage

from contreact.checkpoints.persistence import Ledger, Note, NoteTail
from contreact.graph.state import AgentState, Context
from contreact.nodes.prompts import build_prompt, reflections_section
from contreact.text.tokens import estimate_tokens


def prompt_of(
    state: AgentState,
    notes: NoteTail,
    *,
    text_tools: bool,
    constrained: bool = False,
    reflection_schema: Mapping[str, Any] | None = None,
    tool_schemas: Sequence[dict[str, Any]] | None = None,
) -> list[BaseMessage]:
    """The whole prompt of the next model call: one system message, then the cycle.

    A pure function of checkpointed state, the finished cycles' notes (rows that never
    change) and the run's reflection schema (fixed in its stored config), so a call
    replayed after a resume is sent byte for byte as before.

    Args:
        state: The run's state after this node's update.
        notes: The newest notes of the cycles before `state.cycle`, reaching back to
            `state.reflections_from` (`notes_for_prompt`).
        text_tools: Describe the tools in the system prompt (models without native tools).
        constrained: Introduce them for constrained mode (answers held to a JSON schema).
        reflection_schema: Ask for structured (JSON) reflections fitting it; None: text.
        tool_schemas: The run's tools (`extensions.loading`); None: the six built-ins.
    """
    return build_prompt(
        notes.notes,
        state.messages,
        first_cycle=state.reflections_from,
        older=notes.older,
        advisory=state.advisory,
        task=state.task,
        text_tools=text_tools,
        constrained=constrained,
        reflection_schema=reflection_schema,
        tool_schemas=tool_schemas,
    )


@lru_cache(maxsize=4096)
def note_tokens(note: Note, tasked: bool) -> int:
    """What one earlier note costs in the prompt.

    Notes never change, so each is estimated once per process (keyed by the note, its
    text's hash included) instead of at every step. Only the notes within reach of the
    window are asked for again (about 50 at num_ctx 4096, 2,000 of 250 characters at
    131072), so the cache holds 4,096: enough for them, not a note for every cycle run.
    """
    return estimate_tokens(reflections_section([note], tasked=tasked))


def reach_chars(budget: int) -> int:
    """Reflection characters that surely cost more than `budget` tokens.

    The estimate (`text.tokens`) counts at least one token per 4 characters of any
    script, and a note costs at least its reflection's estimate: notes older than this
    many characters back can never be shown, so they are never read.
    """
    return 4 * max(budget, 0) + 4


def notes_for_prompt(
    ctx: Context, ledger: Ledger, cycle: int, since: int | None = None
) -> NoteTail:
    """The newest notes of `ledger`'s scope before `cycle` that `ctx`'s window could show."""
    budget = ctx.num_ctx - ctx.limits.output_reserve_tokens
    chars = reach_chars(budget)
    return ledger.recent_notes(before=cycle, chars=chars, since=since)


_reached: list[tuple[tuple[Any, ...], tuple[NoteTail, tuple[int, ...]]]] = []
"""The last `in_reach` answer and what it was asked: every step of a cycle asks the same."""


def in_reach(notes: NoteTail, budget: int, tasked: bool) -> tuple[NoteTail, tuple[int, ...]]:
    """The newest notes up to the first whose cost passes `budget`, and their token costs.

    Walking back from the newest note touches only the notes a prompt could show (plus
    the one that does not fit), whatever the length of the run: a note beyond them could
    only be left out.
    """
    # Keyed by the tail's identity (the cached tuple, held here so its id stays unique).
    asked = (notes.notes, notes.older, budget, tasked)
    last = _reached[0] if _reached else None  # one read: another run's thread may replace it
    if last is not None and last[0][0] is notes.notes and last[0][1:] == asked[1:]:
        return last[1]
    costs: list[int] = []
    total = 0
    for note in reversed(notes.notes):
        cost = note_tokens(note, tasked)
        costs.append(cost)
        total += cost
        if total > budget:
            break
    kept = len(costs)
    shown = notes.notes[len(notes.notes) - kept :]
    answer = NoteTail(notes.older + len(notes.notes) - kept, shown), tuple(reversed(costs))
    _reached[:] = [(asked, answer)]
    return answer
