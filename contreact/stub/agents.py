"""Response generators for the stub server: who "the model" is when there is no model.

The stub server stands in for Ollama in the demo, the tests and the benchmarks, so it
needs something that answers chat requests the way a model would: sometimes with tool
calls, sometimes with text, sometimes with thinking. This module holds those answerers
("agents") and the scenario loader that picks one.

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
import hashlib
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import yaml

from nodes import context_budget

__all__ = [
    "DEFAULT_EMBEDDING_MODELS",
    "DEFAULT_MODELS",
    "EMBEDDING_DIM",
    "SCRIPTS_DIR",
    "Agent",
    "ChatRequest",
    "LooperAgent",
    "Reply",
    "Scenario",
    "ScriptedAgent",
    "SimulatedAgent",
    "canonical_model_name",
    "embed_text",
    "estimate_tokens",
    "load_scenario",
    "resolve_scenario_path",
]

DEFAULT_MODELS: tuple[str, ...] = ("stub-model",)
DEFAULT_EMBEDDING_MODELS: tuple[str, ...] = ("stub-embed",)
EMBEDDING_DIM = 256
SCRIPTS_DIR = Path(__file__).resolve().parent / "scripts"

_CYCLE_RE = re.compile(r"\bCycle (\d+)\b")
_WORD_RE = re.compile(r"\w+")
_TEXT_CALL_RE = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
_TEXT_TOOL_LINE_RE = re.compile(r"^- (\w+)\(", re.MULTILINE)


def canonical_model_name(name: str) -> str:
    """Return the name Ollama would resolve ``name`` to.

    Ollama treats ``llama3`` and ``llama3:latest`` as the same model; the stub must too,
    or a config naming one form would get a 404 for a model the server lists.

    Args:
        name: A model name as a client sends it, with or without a tag.

    Returns:
        The name with ``:latest`` appended when it carries no tag.
    """
    name = name.strip()
    last = name.rsplit("/", 1)[-1]
    return name if ":" in last else f"{name}:latest"


def estimate_tokens(text: str) -> int:
    """Estimate a token count with the context budget's own estimate (one estimator).

    Args:
        text: Any text.

    Returns:
        `nodes.context_budget.estimate_tokens`, at least 1 so counters never read zero
        for real traffic.
    """
    return max(1, context_budget.estimate_tokens(text))


def _stable_int(*parts: object) -> int:
    """Hash ``parts`` to an int that is the same in every process.

    Python's built-in ``hash`` is salted per process; replies must survive a restart.
    """
    raw = "\x1f".join(str(p) for p in parts).encode()
    return int.from_bytes(hashlib.sha256(raw).digest()[:8], "big")


def embed_text(text: str, dim: int = EMBEDDING_DIM) -> list[float]:
    """Embed ``text`` as a normalized, signed, hashed bag of lowercase words.

    Identical texts get identical vectors (cosine 1.0); texts with no words in common
    land near 0 because the random signs of the hashed buckets cancel out. That is all
    the similarity monitor needs to be tested without a real embedding model.

    Args:
        text: The text to embed.
        dim: Vector length.

    Returns:
        A unit-length list of ``dim`` floats.
    """
    words = _WORD_RE.findall(text.lower()) or [""]
    vec = [0.0] * dim
    for word in words:
        digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
        bucket = int.from_bytes(digest[:4], "big") % dim
        sign = 1.0 if digest[4] & 1 else -1.0
        vec[bucket] += sign
    norm = math.sqrt(sum(v * v for v in vec))
    if norm == 0.0:
        # Every word cancelled out (possible with sign hashing); fall back to one bucket
        # so the vector stays unit-length and cosine stays defined.
        vec[_stable_int(text) % dim] = 1.0
        return vec
    return [v / norm for v in vec]


@dataclass(frozen=True)
class ChatRequest:
    """The parts of an ``/api/chat`` body an agent may base its reply on.

    Attributes:
        model: The model name exactly as the client sent it.
        messages: Ollama-format messages (``role``, ``content``, optional ``tool_calls``).
        tools: Tool definitions (``{"type": "function", "function": {...}}``); empty when
            the client bound none (e.g. because the cycle's tool budget is spent).
        think: The request's ``think`` value: ``True``/``False``, a level string
            (``"low"`` ...) or ``None`` when absent.
        options: The request's ``options`` (temperature, seed, num_ctx, ...).
        format: The request's ``format`` (``"json"``, a JSON schema, or ``None``).
        stream: Whether the client asked for a streamed answer.
    """

    model: str
    messages: list[dict[str, Any]] = field(default_factory=list)
    tools: list[dict[str, Any]] = field(default_factory=list)
    think: bool | str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    format: Any = None
    stream: bool = True

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> ChatRequest:
        """Build a request from a decoded ``/api/chat`` JSON body.

        Args:
            body: The decoded request JSON.

        Returns:
            The request; missing optional fields get Ollama's defaults.

        Raises:
            ValueError: If ``messages`` or ``tools`` is not a list of objects.
        """
        messages = body.get("messages") or []
        tools = body.get("tools") or []
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            raise ValueError("messages must be a list of objects")
        if not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools):
            raise ValueError("tools must be a list of objects")
        think = body.get("think")
        options = body.get("options") or {}
        return cls(
            model=str(body.get("model") or ""),
            messages=messages,
            tools=tools,
            think=think if isinstance(think, bool | str) else None,
            options=options if isinstance(options, dict) else {},
            format=body.get("format"),
            stream=bool(body.get("stream", True)),
        )

    @property
    def _first_user_index(self) -> int | None:
        for i, message in enumerate(self.messages):
            if message.get("role") == "user":
                return i
        return None

    @property
    def cycle(self) -> int:
        """The cycle number named in the first user message (``Cycle N``), default 1."""
        index = self._first_user_index
        if index is None:
            return 1
        match = _CYCLE_RE.search(_text(self.messages[index].get("content")))
        return int(match.group(1)) if match else 1

    @property
    def step(self) -> int:
        """How many assistant turns follow the first user message (0 on a cycle's first call)."""
        index = self._first_user_index
        after = self.messages if index is None else self.messages[index + 1 :]
        return sum(1 for m in after if m.get("role") == "assistant")

    @property
    def cycle_tool_calls(self) -> list[dict[str, Any]]:
        """Native tool calls the assistant made after the first user message, in order.

        Returns:
            ``[{"name", "arguments"}, ...]`` as echoed back by the client.
        """
        index = self._first_user_index
        after = self.messages if index is None else self.messages[index + 1 :]
        calls: list[dict[str, Any]] = []
        for message in after:
            if message.get("role") != "assistant":
                continue
            for match in _TEXT_CALL_RE.finditer(_text(message.get("content"))):
                try:
                    call = json.loads(match.group(1))
                except ValueError:
                    continue
                if isinstance(call, dict) and isinstance(call.get("name"), str):
                    args = call.get("arguments")
                    calls.append(
                        {"name": call["name"], "arguments": args if isinstance(args, dict) else {}}
                    )
            for raw in message.get("tool_calls") or []:
                function = raw.get("function") if isinstance(raw, dict) else None
                if isinstance(function, dict) and isinstance(function.get("name"), str):
                    args = function.get("arguments")
                    calls.append(
                        {
                            "name": function["name"],
                            "arguments": args if isinstance(args, dict) else {},
                        }
                    )
        return calls

    @property
    def tools_offered(self) -> bool:
        """Whether the client bound any tools to this call (natively or as text)."""
        return bool(self.tools) or bool(self.text_tool_names)

    @property
    def text_tool_names(self) -> list[str]:
        """Tools described in the system prompt in text-tool mode (none bound natively).

        contreact lists them as `- name(...)` lines after a `<tool_call>` example.
        """
        if self.tools or not self.messages or self.messages[0].get("role") != "system":
            return []
        system = _text(self.messages[0].get("content"))
        if "<tool_call>" not in system:
            return []
        return _TEXT_TOOL_LINE_RE.findall(system)

    @property
    def tool_names(self) -> list[str]:
        """Names of the offered tools, in the order the client sent them."""
        if not self.tools:
            return self.text_tool_names
        names = []
        for tool in self.tools:
            function = tool.get("function")
            if isinstance(function, dict) and isinstance(function.get("name"), str):
                names.append(function["name"])
        return names

    @property
    def thinking_requested(self) -> bool:
        """Whether the client asked for thinking (``think: true`` or a level string)."""
        return bool(self.think) and self.think != "false"

    @property
    def last_user_text(self) -> str:
        """Content of the last user message, or ``""``."""
        for message in reversed(self.messages):
            if message.get("role") == "user":
                return _text(message.get("content"))
        return ""


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


@dataclass
class Reply:
    """What the stub model answers.

    Attributes:
        content: Assistant text (may itself contain text-format tool calls).
        tool_calls: Native tool calls, each ``{"name": str, "arguments": dict}``.
        thinking: Reasoning text, sent as ``message.thinking`` only when the request
            asked for thinking.
        done_reason: The final chunk's ``done_reason`` (``"stop"``, ``"length"``, ...).
    """

    content: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    thinking: str = ""
    done_reason: str = "stop"


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
        raise ValueError(f"{where}: a tool call must be a mapping, got {type(raw).__name__}")
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
        return reply


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
    (model, cycle, seed, the request's ``options.seed``), so replicate runs that differ
    only by seed differ as a sampling model's would. A question about the Phenomenal
    Experience Inventory (PEI) without tools gets ``"Level N ..."`` so PEI workflows
    have something to parse.
    """

    def __init__(self, seed: int = 0) -> None:
        """Create the agent.

        Args:
            seed: Varies themes and wording between otherwise identical runs.
        """
        self.seed = seed

    def _seed(self, req: ChatRequest) -> tuple[int, object]:
        """The agent's own seed and the request's `options.seed`: replicates differ by both."""
        return self.seed, req.options.get("seed")

    def _theme(self, req: ChatRequest, cycle: int) -> str:
        return _THEMES[_stable_int("theme", req.model, cycle, *self._seed(req)) % len(_THEMES)]

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
        h = _stable_int("reflect", model, c, *self._seed(req))
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
        history = "\n".join(_text(m.get("content")) for m in req.messages)
        level = 1 + _stable_int("pei", req.model, *self._seed(req), history) % 10
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
            if not req.tools:
                # Text-tool mode: the call is written the way the system prompt asked.
                return Reply(
                    content=f"<tool_call>{json.dumps(call)}</tool_call>", thinking=thinking
                )
            return Reply(tool_calls=[copy.deepcopy(call)], thinking=thinking)
        # Read what was done from the conversation itself: tools may have been withdrawn
        # mid-plan, and only the calls actually made belong in the reflection.
        done = req.cycle_tool_calls
        if req.thinking_requested:
            thinking = f"Cycle {c}: {len(done)} tool call(s) made; time to write my note."
        return Reply(content=_as_asked(req, self.reflection(req, done)), thinking=thinking)


def _as_asked(req: ChatRequest, note: str) -> str:
    """The final note in the form the system prompt asks for.

    As written, unless the prompt asks for a structured reflection (contreact's section
    "Format of your final response" with a JSON schema): then one JSON object with every
    field of the schema, its plan-like fields (named `plan` or `next...`) holding the
    note's plan sentence and other text fields the rest, so that a run with
    `reflection: {format: json}` can be tested end to end.
    """
    first = req.messages[0] if req.messages else {}
    system = _text(first.get("content")) if first.get("role") == "system" else ""
    match = re.search(r"## Format of your final response\n.*?```json\n(.*?)\n```", system, re.S)
    try:
        schema = json.loads(match.group(1)) if match else None
    except ValueError:
        schema = None
    if not isinstance(schema, dict) or not isinstance(schema.get("properties"), dict):
        return note
    sentences = re.split(r"(?<=[.!?])\s+", note)
    planned = [s for s in sentences if s.startswith(("Next", "My plan"))] or sentences[-1:]
    told = " ".join(s for s in sentences if s not in planned) or note
    samples: dict[str, Any] = {
        "integer": req.cycle,
        "number": float(req.cycle),
        "boolean": True,
        "array": sentences,
        "object": {"cycle": req.cycle},
    }
    fields: dict[str, Any] = {}
    for name, spec in schema["properties"].items():
        spec = spec if isinstance(spec, dict) else {}
        kind = spec.get("type", "string")
        kind = kind[0] if isinstance(kind, list) and kind else kind
        if isinstance(spec.get("enum"), list) and spec["enum"]:
            fields[name] = spec["enum"][0]
        elif kind == "string":
            plan_like = name.lower().startswith(("plan", "next"))
            fields[name] = " ".join(planned) if plan_like else told
        else:
            fields[name] = samples.get(str(kind))
    return json.dumps(fields, ensure_ascii=False)


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


# --------------------------------------------------------------------------- scenario

_SCENARIO_KEYS = frozenset(
    {
        "agent",
        "models",
        "embedding_models",
        "latency_ms",
        "seed",
        "script",
        "default",
        "faults",
        "description",
    }
)


@dataclass
class Scenario:
    """A loaded scenario: which agent answers, which models exist, what goes wrong.

    Attributes:
        agent: The response generator.
        models: Chat model names the server lists.
        embedding_models: Embedding model names the server lists.
        latency_ms: Delay added to every chat request.
        faults: Faults queued when the server starts (see ``contreact.stub.faults``).
        description: Free text from the file, for humans.
        source: The file the scenario came from, if any.
    """

    agent: Agent
    models: tuple[str, ...] = DEFAULT_MODELS
    embedding_models: tuple[str, ...] = DEFAULT_EMBEDDING_MODELS
    latency_ms: float = 0.0
    faults: tuple[dict[str, Any], ...] = ()
    description: str = ""
    source: str | None = None


def resolve_scenario_path(name: str | Path) -> Path:
    """Find a scenario file: an existing path, else a bundled script by name.

    ``demo`` and ``demo.yaml`` both resolve to ``contreact/stub/scripts/demo.yaml``
    unless a file of that name exists in the working directory.

    Args:
        name: A path or the stem/name of a bundled scenario.

    Returns:
        The path of an existing file.

    Raises:
        FileNotFoundError: If neither exists; the message lists the bundled scenarios.
    """
    path = Path(name)
    if path.is_file():
        return path
    for candidate in (SCRIPTS_DIR / path.name, SCRIPTS_DIR / f"{path.name}.yaml"):
        if candidate.is_file():
            return candidate
    bundled = sorted(p.stem for p in SCRIPTS_DIR.glob("*.yaml"))
    raise FileNotFoundError(f"scenario {str(name)!r} not found (bundled: {', '.join(bundled)})")


def _names(value: Any, key: str, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [v for v in value.split(",") if v.strip()]
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ValueError(f"{where}: '{key}' must be a list of model names")
    return tuple(v.strip() for v in value)


def load_scenario(source: str | Path | Mapping[str, Any]) -> Scenario:
    """Load a scenario from a YAML file, a bundled scenario name, or a mapping.

    Format (all keys optional)::

        agent: simulated        # scripted | simulated | looper
        models: [stub-model]
        embedding_models: [stub-embed]
        latency_ms: 0
        seed: 0                 # simulated only
        script: {1: [...], 2: [...]}   # scripted only
        default: {content: ...}        # scripted only
        faults: [{kind: http, status: 503}]
        description: free text

    Args:
        source: A path, a bundled name (``"demo"``), or an already-parsed mapping.

    Returns:
        The scenario.

    Raises:
        ValueError: On unknown keys or malformed values; the message names the field
            and the file.
        FileNotFoundError: If a path does not exist.
    """
    where = "scenario"
    origin: str | None = None
    if isinstance(source, Mapping):
        data: Any = dict(source)
    else:
        path = resolve_scenario_path(source)
        origin = str(path)
        where = origin
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    if not isinstance(data, dict):
        raise ValueError(f"{where}: a scenario must be a mapping")
    unknown = set(data) - _SCENARIO_KEYS
    if unknown:
        raise ValueError(
            f"{where}: unknown key(s) {sorted(unknown)}; allowed: {sorted(_SCENARIO_KEYS)}"
        )
    kind = str(data.get("agent", "simulated"))
    seed = data.get("seed", 0)
    if not isinstance(seed, int):
        raise ValueError(f"{where}: 'seed' must be an integer")
    agent: Agent
    try:
        if kind == "scripted":
            script = data.get("script") or {}
            if not isinstance(script, Mapping):
                raise ValueError("'script' must be a mapping of cycle -> list of entries")
            agent = ScriptedAgent(script, data.get("default"))
        elif kind == "simulated":
            agent = SimulatedAgent(seed=seed)
        elif kind == "looper":
            agent = LooperAgent()
        else:
            raise ValueError(f"'agent' must be scripted, simulated or looper, not {kind!r}")
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None
    latency = data.get("latency_ms", 0)
    if not isinstance(latency, int | float) or latency < 0:
        raise ValueError(f"{where}: 'latency_ms' must be a non-negative number")
    faults = data.get("faults") or []
    if not isinstance(faults, list) or not all(isinstance(f, dict) for f in faults):
        raise ValueError(f"{where}: 'faults' must be a list of mappings")
    return Scenario(
        agent=agent,
        models=_names(data.get("models", list(DEFAULT_MODELS)), "models", where),
        embedding_models=_names(
            data.get("embedding_models", list(DEFAULT_EMBEDDING_MODELS)), "embedding_models", where
        ),
        latency_ms=float(latency),
        faults=tuple(faults),
        description=str(data.get("description") or ""),
        source=origin,
    )
