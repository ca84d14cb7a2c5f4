"""A cycle's events as a transcript: each entry marked as what it is, its texts kept whole.

The event log holds everything a cycle did (`checkpoints.events`); a person reading it wants
the model calls, the tool calls with their arguments and results, and the reflection, with
what came from elsewhere (a hook, an intervention, the operator) marked as such. Texts are
handed to the templates as they were stored: the templates escape them, nothing here
builds HTML.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from contreact.ollama.server_numbers import number


@dataclass(frozen=True)
class Block:
    """A text of an entry: a label and the text, shown as written."""

    label: str
    text: str
    folded: bool = False
    """Shown closed (a prompt, the model's thinking): long and seldom read."""


@dataclass(frozen=True)
class Entry:
    """One thing that happened in a cycle."""

    kind: str
    """What it is: `model`, `tool`, `operator`, `hook`, `intervention`, `error`,
    `reflection`, `cycle`, `similarity`, `trim` or `run`."""
    title: str
    at: str
    facts: list[str] = field(default_factory=list)
    blocks: list[Block] = field(default_factory=list)
    alert: bool = False
    """A failure or a refusal, drawn so that it stands out."""


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2, default=str)


def _count(value: Any) -> str:
    checked = number(value)
    return "?" if checked is None else f"{checked:g}"


def _seconds(value: Any) -> str:
    checked = number(value)
    return "" if checked is None else f"{float(checked):.2f} s"


def _messages(messages: Iterable[dict[str, Any]]) -> str:
    lines = []
    for message in messages:
        role = str(message.get("role", "?"))
        content = message.get("content")
        if content is None and "sha256" in message:
            notes = message.get("notes_of_cycles") or []
            span = f", notes of cycles {notes[0]}-{notes[1]}" if notes else ""
            content = f"(the system prompt, {message.get('chars')} characters{span})"
        text = content if isinstance(content, str) else _json(content)
        calls = message.get("tool_calls")
        if calls:
            text += "\n" + _json(calls)
        lines.append(f"[{role}] {text}")
    return "\n\n".join(lines)


def _model(p: dict[str, Any]) -> Entry:
    response = p.get("response") or {}
    facts = [f"tokens {_count(p.get('tokens_in'))} in / {_count(p.get('tokens_out'))} out"]
    facts += [_seconds(p.get("duration_s"))]
    if p.get("done_reason") not in (None, "stop"):
        facts.append(f"done: {p.get('done_reason')}")
    facts += [str(flag) for flag in p.get("flags") or []]
    if p.get("retries"):
        facts.append(f"{len(p['retries'])} retries")
    blocks = [
        Block("prompt, new since the last call", _messages(p.get("new_messages") or []), True)
    ]
    if response.get("thinking"):
        blocks.append(Block("thinking", str(response["thinking"]), True))
    if response.get("content"):
        blocks.append(Block("answer", str(response["content"])))
    for call in response.get("tool_calls") or []:
        blocks.append(Block(f"calls {call.get('name')}", _json(call.get("args"))))
    step = int(number(p.get("step")) or 0) + 1
    return Entry("model", f"Model call {step}", "", [f for f in facts if f], blocks)


def _tool(p: dict[str, Any]) -> Entry:
    facts = [name for name in ("error", "refused", "truncated") if p.get(name)]
    facts.append(_seconds(p.get("duration_s")))
    return Entry(
        "tool",
        f"Tool {p.get('tool_name', '?')}",
        "",
        [f for f in facts if f],
        [
            Block("arguments", _json(p.get("parameters") or {})),
            Block("result", str(p.get("output", ""))),
        ],
        alert=bool(p.get("error") or p.get("refused")),
    )


def _operator(p: dict[str, Any]) -> Entry:
    facts = [f"policy {p.get('policy', '?')}"]
    if p.get("wait_s") is not None:
        facts.append(f"waited {_seconds(p.get('wait_s'))}")
    return Entry(
        "operator",
        "Message to the operator",
        "",
        facts,
        [Block("agent", str(p.get("message", ""))), Block("operator", str(p.get("reply", "")))],
    )


def _hook(p: dict[str, Any]) -> Entry:
    blocks = [Block("arguments given", _json(p.get("parameters") or {}))]
    if p.get("rewritten") is not None:
        blocks.append(Block("ran with", _json(p["rewritten"])))
    if p.get("reason"):
        blocks.append(Block("reason", str(p["reason"])))
    title = f"Hook {p.get('action', '?')} of {p.get('tool_name', '?')}"
    return Entry(
        "hook", title, "", [str(p.get("hook", ""))], blocks, alert=p.get("action") == "veto"
    )


def _intervention(p: dict[str, Any]) -> Entry:
    facts = [f"interventions[{p.get('index', '?')}]"]
    if p.get("tool_name"):
        facts.append(str(p["tool_name"]))
    return Entry(
        "intervention",
        f"Intervention: {p.get('kind', '?')}",
        "",
        facts,
        [Block("did", _json(p.get("detail") or {}))],
    )


def _error(p: dict[str, Any]) -> Entry:
    facts = [str(p[k]) for k in ("model", "host", "tool_name") if p.get(k)]
    if p.get("attempts"):
        facts.append(f"{p['attempts']} attempts")
    return Entry(
        "error",
        f"Error: {p.get('kind', '?')}",
        "",
        facts,
        [Block("message", str(p.get("message", "")))],
        alert=True,
    )


def _cycle_start(p: dict[str, Any]) -> Entry:
    blocks = [Block("opening", str(p.get("opening", "")))] if p.get("opening") else []
    if p.get("advisory"):
        blocks.append(Block("advisory from the similarity monitor", str(p["advisory"])))
    return Entry("cycle", "Cycle opens", "", [], blocks)


def _reflection(p: dict[str, Any]) -> Entry:
    metrics = p.get("metrics") or {}
    facts = [
        f"{k.replace('_', ' ')} {_count(metrics.get(k))}" for k in _SHOWN_METRICS if k in metrics
    ]
    facts += [str(flag) for flag in p.get("flags") or []]
    blocks = [Block("reflection", str(p.get("final_reflection", "")))]
    if p.get("reflection_fields"):
        blocks.append(Block("fields", _json(p["reflection_fields"])))
    return Entry("reflection", "Reflection", "", facts, blocks)


_SHOWN_METRICS = ("steps", "tool_calls", "memory_ops_total", "final_memory_keys", "tokens_out")


def _similarity(p: dict[str, Any]) -> Entry:
    facts = [f"max {float(number(p.get('maximum')) or 0):.2f}", f"level {p.get('level', 'none')}"]
    if p.get("most_similar_cycle"):
        facts.append(f"most like cycle {p['most_similar_cycle']}")
    facts.append(str(p.get("method", "")))
    blocks = [Block("advisory", str(p["advisory"]))] if p.get("advisory") else []
    return Entry("similarity", "Similarity to earlier reflections", "", facts, blocks)


def _trim(p: dict[str, Any]) -> Entry:
    facts = [
        f"{p.get('dropped_messages', 0)} messages dropped",
        f"{p.get('reflections_omitted', 0)} reflections left out",
        f"tokens {p.get('tokens_before')} → {p.get('tokens_after')} of {p.get('budget')}",
    ]
    return Entry("trim", "Context trimmed", "", facts, [], alert=not p.get("fits", True))


def _run_start(p: dict[str, Any]) -> Entry:
    if p.get("forked_from"):
        return Entry(
            "run",
            f"Fork of {p['forked_from']} after cycle {p.get('at_cycle')}",
            "",
            [str(p.get("model", ""))],
        )
    facts = [str(p.get("model", "")), str(p.get("host", ""))]
    if p.get("seed") is not None:
        facts.append(f"seed {p['seed']}")
    return Entry("run", "Run starts", "", [f for f in facts if f])


_ENTRIES: dict[str, Callable[[dict[str, Any]], Entry]] = {
    "LLM_INVOCATION": _model,
    "TOOL_CALL": _tool,
    "OPERATOR_MESSAGE": _operator,
    "HOOK": _hook,
    "INTERVENTION": _intervention,
    "ERROR": _error,
    "CYCLE_START": _cycle_start,
    "CYCLE_END": _reflection,
    "SIMILARITY": _similarity,
    "CONTEXT_TRIM": _trim,
    "RUN_START": _run_start,
    "PROVENANCE": lambda p: Entry("run", f"Run goes on ({p.get('occasion', 'resume')})", "", []),
    "HOST_CHANGE": lambda p: Entry("run", "Host changed", "", [f"{p.get('from')} → {p.get('to')}"]),
    "RUN_END": lambda p: Entry("run", "Run ends", "", [f"{p.get('cycles')} cycles"]),
    "RECORD_SKIPPED": lambda p: Entry(
        "error",
        "Record skipped",
        "",
        [str(p.get("key", ""))],
        [Block("why", str(p.get("reason", "")))],
        alert=True,
    ),
    "EXTENSIONS": lambda p: Entry(
        "run",
        "Extensions",
        "",
        [str(t.get("name")) for t in p.get("tools") or []]
        + [str(h.get("import_path")) for h in p.get("hooks") or []],
    ),
}


def entries(lines: Iterable[dict[str, Any]]) -> list[Entry]:
    """The transcript of events (as `checkpoints.events.as_line` gives them), in log order."""
    found = []
    for line in lines:
        payload = line.get("payload")
        payload = payload if isinstance(payload, dict) else {"payload": payload}
        kind = str(line.get("event_type", ""))
        make = _ENTRIES.get(kind)
        entry = (
            make(payload)
            if make
            else Entry("run", kind, "", [], [Block("payload", _json(payload))])
        )
        stamp = str(line.get("timestamp", ""))
        found.append(
            Entry(entry.kind, entry.title, stamp[11:19], entry.facts, entry.blocks, entry.alert)
        )
    return found
