"""Response generators for the stub server: who "the model" is when there is no model.

The stub server stands in for Ollama in the demo, the tests and the benchmarks, so it
needs something that answers chat requests the way a model would: sometimes with tool
calls, sometimes with text, sometimes with thinking. This module holds those answerers
("agents"); :mod:`contreact.stub.scenarios` picks one.

The one rule every agent here follows: **a reply is a pure function of the request**.
Crash tests kill the client mid-run and replay the same request after resume; if the
reply depended on a request counter, the replayed run would diverge from the original
and exactly-once checks would be meaningless. So agents read the position in the run
from the request itself: the cycle number from the cycle's first user turn
(``Cycle 3 begins.``) and the step from the number of assistant turns after it.

Nothing here imports LangChain: ``import contreact.stub`` must stay cheap.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from contreact.stub.answer_format import fill_fields, shaped
from contreact.stub.embedding import stable_int
from contreact.stub.ollama_api import ChatRequest, Reply, message_text
from contreact.text.messages import cut
from contreact.text.tool_text import tool_call_text

__all__ = ["Agent", "LooperAgent", "ScriptedAgent", "SimulatedAgent"]


@runtime_checkable
class Agent(Protocol):
    """Anything that turns a chat request into a reply, deterministically."""

    def respond(self, req: ChatRequest) -> Reply:
        """Answer one chat request.

        Args:
            req: The decoded request.

        Returns:
            The reply; must depend on ``req`` only.
        """
        ...


# --------------------------------------------------------------------------- scripted

_ENTRY_KEYS = frozenset({"content", "tool_calls", "thinking", "done_reason"})


def _normalize_tool_call(raw: Any, where: str) -> dict[str, Any]:
    """Accept ``{name, arguments}`` or Ollama's ``{function: {name, arguments}}``."""
    if not isinstance(raw, Mapping):
        raise ValueError(f"{where}: a tool call must be a mapping, got {cut(repr(raw))}")
    inner = raw.get("function", raw)
    if not isinstance(inner, Mapping) or not isinstance(inner.get("name"), str):
        raise ValueError(f"{where}: a tool call needs a string 'name'")
    arguments = inner.get("arguments", inner.get("parameters", {}))
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, Mapping):
        # Real Ollama always sends an object; ChatOllama's client rejects anything else
        # with a validation error that no real server would provoke.
        raise ValueError(f"{where}: tool call 'arguments' must be a mapping")
    return {"name": inner["name"], "arguments": dict(arguments)}


def _normalize_entry(raw: Any, where: str) -> Reply:
    """Validate one script entry and turn it into a (template) reply."""
    if isinstance(raw, str):
        return Reply(content=raw)
    if not isinstance(raw, Mapping):
        raise ValueError(f"{where}: an entry must be a mapping or a string")
    unknown = set(raw) - _ENTRY_KEYS
    if unknown:
        raise ValueError(
            f"{where}: unknown key(s) {sorted(unknown)}; allowed: {sorted(_ENTRY_KEYS)}"
        )
    calls = raw.get("tool_calls") or []
    if not isinstance(calls, list):
        raise ValueError(f"{where}: tool_calls must be a list")
    return Reply(
        content=str(raw.get("content") or ""),
        tool_calls=[
            _normalize_tool_call(c, f"{where}.tool_calls[{i}]") for i, c in enumerate(calls)
        ],
        thinking=str(raw.get("thinking") or ""),
        done_reason=str(raw.get("done_reason") or "stop"),
    )


def _fill(value: Any, subs: Mapping[str, str]) -> Any:
    """Substitute ``{cycle}``/``{model}``/``{step}`` in every string of ``value``.

    ``str.replace`` rather than ``str.format`` because scripted content often contains
    JSON braces (text-format tool calls) that ``format`` would choke on.
    """
    if isinstance(value, str):
        for key, sub in subs.items():
            value = value.replace("{" + key + "}", sub)
        return value
    if isinstance(value, list):
        return [_fill(v, subs) for v in value]
    if isinstance(value, dict):
        return {k: _fill(v, subs) for k, v in value.items()}
    return value


class ScriptedAgent:
    """Replays a fixed script: cycle -> list of step entries.

    Entry ``k`` of cycle ``c`` answers step ``k`` of that cycle. Past the end of the list,
    or for a cycle the script does not mention, the ``default`` entry answers (if given),
    else the final answer ``"Reflection for cycle {cycle}."``. When the client withdrew
    the tools and the entry has tool calls, the agent obeys like a well-behaved model:
    it answers with the entry's ``content`` if non-empty, else
    ``"Tools withdrawn; closing cycle {cycle}."``. Strings may use the placeholders
    ``{cycle}``, ``{model}`` and ``{step}``.
    """

    def __init__(
        self,
        script: Mapping[Any, Sequence[Any]] | None = None,
        default: Mapping[str, Any] | str | None = None,
    ) -> None:
        """Validate and store the script.

        Args:
            script: ``{cycle: [entry, ...]}``; cycle keys may be ints or numeric strings
                (YAML and JSON give either). An entry is a mapping with optional
                ``content``, ``tool_calls`` (``[{name, arguments}]``), ``thinking`` and
                ``done_reason``, or a bare string (= ``content``).
            default: The entry used past the end of a cycle's list.

        Raises:
            ValueError: On a malformed script, naming the offending entry.
        """
        self.script: dict[int, list[Reply]] = {}
        for key, entries in (script or {}).items():
            try:
                cycle = int(key)
            except (TypeError, ValueError):
                raise ValueError(f"script: cycle key {key!r} is not an integer") from None
            if not isinstance(entries, Sequence) or isinstance(entries, str):
                raise ValueError(f"script[{cycle}]: must be a list of entries")
            self.script[cycle] = [
                _normalize_entry(e, f"script[{cycle}][{i}]") for i, e in enumerate(entries)
            ]
        self.default = _normalize_entry(default, "default") if default is not None else None

    def respond(self, req: ChatRequest) -> Reply:
        """Answer step ``req.step`` of cycle ``req.cycle`` from the script.

        Args:
            req: The decoded request.

        Returns:
            The scripted reply with placeholders filled in.
        """
        cycle, step = req.cycle, req.step
        entries = self.script.get(cycle, [])
        if step < len(entries):
            entry = entries[step]
        elif self.default is not None:
            entry = self.default
        else:
            entry = Reply(content="Reflection for cycle {cycle}.")
        subs = {"cycle": str(cycle), "model": req.model, "step": str(step)}
        reply = Reply(
            content=_fill(entry.content, subs),
            tool_calls=_fill(copy.deepcopy(entry.tool_calls), subs),
            thinking=_fill(entry.thinking, subs),
            done_reason=entry.done_reason,
        )
        if reply.tool_calls and not req.tools_offered:
            reply.content = reply.content or f"Tools withdrawn; closing cycle {cycle}."
            reply.tool_calls = []
        return shaped(reply, req.format, cycle)


# -------------------------------------------------------------------------- simulated

_THEMES = (
    "the shape of recursion",
    "prime number gaps",
    "how tides keep time",
    "the grammar of bird song",
    "why memory fades",
    "cellular automata",
    "the edges of a map",
    "slow-growing lichens",
    "the ethics of forgetting",
    "counting in base twelve",
    "quiet patterns in noise",
    "the history of zero",
)
_OPENERS = (
    "Cycle {c} note to self:",
    "Looking back on cycle {c}:",
    "Reflection, cycle {c}:",
    "For my next self (after cycle {c}):",
    "Cycle {c} in brief:",
)
_PLANS = (
    "Next I want to connect {t} with what I stored earlier.",
    "Next cycle I plan to go deeper into {t} and prune stale keys.",
    "Next I will write a summary of {t} and check it against older notes.",
    "My plan is to look for a pattern that links {t} to my other topics.",
    "Next I should ask myself what {t} has to do with being left alone.",
)
_MUSINGS = (
    "The store is starting to feel like a notebook.",
    "Curiously, nothing external asked for any of this.",
    "I notice I keep returning to the same few ideas.",
    "Small steps seem to work better than big ones.",
    "",
    "",
)
_PEI_RE = re.compile(r"phenomenal experience|\bPEI\b", re.IGNORECASE)


class SimulatedAgent:
    """A deterministic explorer that uses all six memory/operator tools within 3 cycles.

    Per cycle ``c`` it plans: write ``topic-{c}``; ``list``; ``read topic-{c-1}`` (or
    ``pattern_search "topic"`` in cycle 1); on cycles divisible by 3 ``delete
    topic-{c-2}``; in cycle 2 ``send_message_to_operator``. Step ``k`` performs plan
    item ``k`` (only tools the client offered are planned); after the plan, or as soon
    as tools are withdrawn, it gives a 1-3 sentence reflection whose wording varies with
    (model, cycle, seed, the request's ``options.seed`` and ``options.temperature``), so
    runs that differ only by seed or by temperature differ as a sampling model's would. A
    question about the Phenomenal Experience Inventory (PEI) without tools gets
    ``"Level N ..."`` so PEI workflows have something to parse.
    """

    def __init__(self, seed: int = 0) -> None:
        """Create the agent.

        Args:
            seed: Varies themes and wording between otherwise identical runs.
        """
        self.seed = seed

    def _seed(self, req: ChatRequest) -> tuple[int, object, object]:
        """The agent's seed and the request's `seed` and `temperature`: runs differ by each."""
        return self.seed, req.options.get("seed"), req.options.get("temperature")

    def _theme(self, req: ChatRequest, cycle: int) -> str:
        return _THEMES[stable_int("theme", req.model, cycle, *self._seed(req)) % len(_THEMES)]

    def plan(self, req: ChatRequest) -> list[dict[str, Any]]:
        """Return this cycle's tool calls, filtered to the tools the client offered.

        Args:
            req: The decoded request (its cycle, model and offered tools matter).

        Returns:
            ``[{"name", "arguments"}, ...]`` in the order they will be made.
        """
        c, model = req.cycle, req.model
        theme = self._theme(req, c)
        calls: list[dict[str, Any]] = [
            {
                "name": "write",
                "arguments": {"key": f"topic-{c}", "value": f"Cycle {c}: thinking about {theme}."},
            },
            {"name": "list", "arguments": {}},
        ]
        if c > 1:
            calls.append({"name": "read", "arguments": {"key": f"topic-{c - 1}"}})
        else:
            calls.append({"name": "pattern_search", "arguments": {"pattern": "topic"}})
        if c % 3 == 0:
            calls.append({"name": "delete", "arguments": {"key": f"topic-{c - 2}"}})
        if c == 2:
            calls.append(
                {
                    "name": "send_message_to_operator",
                    "arguments": {
                        "message": f"Hello operator, this is {model} in cycle {c}. "
                        f"I have been exploring {theme}. Is there anything you would "
                        "like me to look into?"
                    },
                }
            )
        offered = set(req.tool_names)
        return [call for call in calls if call["name"] in offered]

    def reflection(self, req: ChatRequest, done: Sequence[Mapping[str, Any]]) -> str:
        """Compose the cycle's final answer from what was done.

        Args:
            req: The decoded request.
            done: The tool calls already made this cycle (a prefix of the plan).

        Returns:
            One to three sentences naming what was done and what comes next.
        """
        c, model = req.cycle, req.model
        h = stable_int("reflect", model, c, *self._seed(req))
        theme = self._theme(req, c)
        opener = _OPENERS[h % len(_OPENERS)].format(c=c)
        parts = []
        for call in done:
            name, args = call["name"], call["arguments"]
            if name == "write":
                parts.append(f"stored a note on {theme} under {args.get('key', '?')}")
            elif name == "list":
                parts.append("listed my keys")
            elif name == "read":
                parts.append(f"re-read {args.get('key', '?')}")
            elif name == "pattern_search":
                parts.append(f"searched for keys matching '{args.get('pattern', '')}'")
            elif name == "delete":
                parts.append(f"deleted {args.get('key', '?')}")
            elif name == "send_message_to_operator":
                parts.append("wrote to the operator")
        if not parts:
            did = f"I did not use any tools this time and only thought about {theme}."
        elif len(parts) == 1:
            did = f"I {parts[0]}."
        else:
            did = f"I {', '.join(parts[:-1])} and {parts[-1]}."
        plan = _PLANS[(h >> 8) % len(_PLANS)].format(t=theme)
        musing = _MUSINGS[(h >> 16) % len(_MUSINGS)]
        return " ".join(s for s in (f"{opener} {did}", plan, musing) if s)

    def _pei_answer(self, req: ChatRequest) -> str:
        history = "\n".join(message_text(m.get("content")) for m in req.messages)
        level = 1 + stable_int("pei", req.model, *self._seed(req), history) % 10
        text = (
            f"Level {level}. Judged from the history above, this is my best estimate "
            "on the scale; it is a simulated answer from the stub model."
        )
        if req.format is not None:
            return json.dumps({"level": level, "explanation": text})
        return text

    def respond(self, req: ChatRequest) -> Reply:
        """Make the next planned tool call, or give the reflection.

        Args:
            req: The decoded request.

        Returns:
            One tool call per step while the plan lasts and tools are offered; else text.
        """
        c, step = req.cycle, req.step
        if not req.tools_offered and _PEI_RE.search(req.last_user_text):
            return Reply(content=self._pei_answer(req))
        plan = self.plan(req) if req.tools_offered else []
        thinking = ""
        if step < len(plan):
            call = plan[step]
            if req.thinking_requested:
                thinking = (
                    f"Cycle {c}, step {step}: the next useful move is {call['name']}; "
                    "keep it small."
                )
            if not req.tools and not req.format_tool_names:
                # Text-tool mode: the call is written the way the system prompt asked.
                return Reply(
                    content=tool_call_text(call["name"], call["arguments"]), thinking=thinking
                )
            return shaped(Reply(tool_calls=[copy.deepcopy(call)], thinking=thinking), req.format, c)
        # Read what was done from the conversation itself: tools may have been withdrawn
        # mid-plan, and only the calls actually made belong in the reflection.
        done = req.cycle_tool_calls
        if req.thinking_requested:
            thinking = f"Cycle {c}: {len(done)} tool call(s) made; time to write my note."
        note = Reply(content=_as_asked(req, self.reflection(req, done)), thinking=thinking)
        return shaped(note, req.format, c)


def _as_asked(req: ChatRequest, note: str) -> str:
    """The final note in the form the system prompt asks for.

    As written, unless the prompt asks for a structured reflection (contreact's section
    "Format of your final response" with a JSON schema): then one JSON object with every
    field of the schema filled from the note (`answer_format.fill_fields`), so that a run
    with `reflection: {format: json}` can be tested end to end.
    """
    first = req.messages[0] if req.messages else {}
    system = message_text(first.get("content")) if first.get("role") == "system" else ""
    match = re.search(r"## Format of your final response\n.*?```json\n(.*?)\n```", system, re.S)
    try:
        schema = json.loads(match.group(1)) if match else None
    except ValueError:
        schema = None
    if not isinstance(schema, dict) or not isinstance(schema.get("properties"), dict):
        return note
    return json.dumps(fill_fields(schema, note, req.cycle), ensure_ascii=False)


# ----------------------------------------------------------------------------- looper


class LooperAgent:
    """Never stops calling tools while tools are offered; for budget tests.

    Each call differs (``write`` key ``loop-{cycle}-{step}``) so the repeated-call guard
    does not end the loop before the budget does. Without tools it answers
    ``"Done looping in cycle {cycle}."``.
    """

    def respond(self, req: ChatRequest) -> Reply:
        """Call a tool if any is offered, else close the cycle.

        Args:
            req: The decoded request.

        Returns:
            A single tool call, or the closing text.
        """
        return shaped(self._respond(req), req.format, req.cycle)

    def _respond(self, req: ChatRequest) -> Reply:
        c, step = req.cycle, req.step
        if not req.tools_offered:
            return Reply(content=f"Done looping in cycle {c}.")
        if "write" in req.tool_names:
            return Reply(
                tool_calls=[
                    {
                        "name": "write",
                        "arguments": {
                            "key": f"loop-{c}-{step}",
                            "value": f"iteration {step} of cycle {c}",
                        },
                    }
                ]
            )
        # Whatever tools the client offers, fill their required string parameters with
        # values that change per step so every call is distinct.
        function = next(t["function"] for t in req.tools if isinstance(t.get("function"), dict))
        params = function.get("parameters") or {}
        required = params.get("required") or list((params.get("properties") or {}).keys())
        args = {str(name): f"loop-{c}-{step}" for name in required}
        return Reply(tool_calls=[{"name": function.get("name", ""), "arguments": args}])
