"""reflect: close the cycle, check for repetition, start the next cycle or end the run.

The cycle's record (reflection, metrics, similarity, advisory) commits in one
transaction with its SIMILARITY, CYCLE_END (and RUN_END) events, keyed by the cycle
number: a crash after it replays the recorded outcome instead of closing the cycle
twice. The advisory goes into the next cycle's system prompt only. A structured reflection's
fields go into CYCLE_END (`reflection_fields`) for analysis.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from contreact.checkpoints.persistence import (
    CycleEnd,
    CycleRecord,
    Event,
    Ledger,
    RunEnd,
    Similarity,
    Unit,
    keys,
)
from contreact.extensions.loading import extensions_of
from contreact.graph.state import AgentState, Context, StateUpdate, fresh_cycle
from contreact.nodes.similarity import EMBED_TIMEOUT_S, SimilarityReport, assess
from contreact.nodes.step import ledger_of, node, run_id_of
from contreact.text.reflection_format import Accepted, check_reflection, prose_of
from contreact.text.similarity import index_keys


def _similarity(
    unit: Unit, state: AgentState, ctx: Context, ledger: Ledger
) -> tuple[SimilarityReport | None, list[int]]:
    """The monitor's verdict, and the index keys to store with the cycle.

    Compared: the `similarity.recent` newest earlier reflections, and the older ones
    that share an index key with this one (the newest `similarity.per_key` per key) -
    a bounded set, found without reading the past (`checkpoints.similarity_index`).
    """
    if not ctx.similarity.enabled:
        return None, []
    settings = ctx.similarity
    # Structured notes are compared by their words: shared field names are no likeness.
    words = prose_of if ctx.reflection_schema is not None else str
    text = words(state.final_text)
    keys = index_keys(text)
    tail = ledger.recent_notes(before=state.cycle, count=settings.recent)
    recent = tail.notes[-settings.recent :]
    older = []
    if tail.older or len(tail.notes) > len(recent):
        older = unit.similar_notes(keys, before=recent[0].cycle, per_key=settings.per_key)
    return assess(
        text,
        [(n.cycle, words(n.reflection)) for n in [*older, *recent]],
        moderate=ctx.similarity.moderate,
        high=ctx.similarity.high,
        lexical=(ctx.similarity.lexical_moderate, ctx.similarity.lexical_high),
        embedding_model=ctx.similarity.embedding_model,
        host=ctx.host,
        timeout_s=min(ctx.ollama.timeout_s, EMBED_TIMEOUT_S),
    ), keys


def structured_fields(text: str, schema: dict[str, Any] | None) -> dict[str, Any] | None:
    """The fields of a structured reflection, for CYCLE_END.

    None for text reflections and for a note that closed its cycle without being a valid
    one (flagged, kept as written).
    """
    if schema is None:
        return None
    checked = check_reflection(text, schema)
    return checked.fields if isinstance(checked, Accepted) and checked.text == text else None


def notes_seen(first_note: int, cycle: int) -> dict[str, list[int]]:
    """Which earlier cycles' reflections were in the prompt that ended `cycle` ([from, to]).

    The context budget leaves out the oldest reflections when they do not fit; a
    researcher must be able to tell that cycle 9 was written seeing only notes 4-8.
    """
    seen = [first_note, cycle - 1] if first_note < cycle else []
    left_out = [1, first_note - 1] if first_note > 1 else []
    return {"notes_seen": seen, "notes_left_out": left_out}


@node
def reflect(state: AgentState, runtime: Runtime[Context]) -> StateUpdate:
    """Record the cycle's reflection; start the next cycle or complete the run."""
    ctx = runtime.context
    ledger = ledger_of(state, ctx)
    cycle, text = state.cycle, state.final_text
    last = cycle >= state.last_cycle
    # The opening turn is never trimmed, so it is still the cycle's first message.
    first = state.messages[0].content if state.messages else ""
    opening = first if isinstance(first, str) else str(first)
    extensions = extensions_of(ctx)

    def act(unit: Unit) -> tuple[dict[str, Any], list[Event]]:
        report, index = _similarity(unit, state, ctx, ledger)
        metrics: dict[str, Any] = {
            **state.stats,
            "reflection_chars": len(text),
            "final_memory_keys": unit.memory.count(),
        }
        advisory = report.advisory if report else None
        unit.index_keys(cycle, index)
        unit.insert_cycle(
            CycleRecord(
                cycle=cycle,
                reflection=text,
                opening=opening,
                metrics=metrics,
                flags=list(state.flags),
                similarity=report.maximum if report else None,
                advisory=advisory,
            ),
        )
        batch: list[Event] = []
        if report is not None:
            batch.append(Event(cycle, keys.similarity(cycle), Similarity.read(report.as_payload())))
        batch.append(
            Event(
                cycle,
                keys.cycle_end(cycle),
                CycleEnd(
                    final_reflection=text,
                    metrics=metrics,
                    flags=list(state.flags),
                    **notes_seen(state.reflections_from, cycle),
                    reflection_fields=structured_fields(text, ctx.reflection_schema),
                ),
            )
        )
        # Inside the cycle's journaled close: a replayed close does not call them again.
        extensions.call("on_cycle_end", {"cycle": cycle, "reflection": text, "metrics": metrics})
        if last:
            batch.append(Event(cycle, keys.run_end(cycle), RunEnd(cycles=cycle)))
            unit.complete_studio_run(run_id_of(state))
            extensions.call("on_run_end", {"cycle": cycle, "run_id": ledger.run_id})
        return {"advisory": advisory}, batch

    def use(record: dict[str, Any]) -> StateUpdate:
        advisory = record["advisory"]
        if advisory is not None and not isinstance(advisory, str):
            raise TypeError(f"the advisory is a {type(advisory).__name__}, not text")
        if cycle >= state.last_cycle:
            return {"status": "completed", "pending": [], "outcome": ""}
        return fresh_cycle(cycle + 1, advisory=advisory)

    key = keys.cycle_end(cycle)
    # A skipped close keeps the cycle as stored and opens the next one without advice.
    return ledger.used(
        key, cycle, ledger.once(key, cycle, act), use, lambda: {"advisory": None}, SKIPPED_BECOMES
    )


SKIPPED_BECOMES = "a cycle close without a similarity advisory for the next cycle"
