"""Ollama's API bodies as the stub reads and writes them.

Request side: :class:`ChatRequest` (the parts of an ``/api/chat`` body an answerer may
use) and :class:`Reply` (what it answers). Response side: the NDJSON stream lines, the
non-streamed body and the ``/api/embed`` body, shaped as Ollama shapes them so the real
``ChatOllama`` client can be tested against them (what the metadata endpoints say about a
model is in :mod:`contreact.stub.model_cards`).
Anything that answers requests (scripted agents, a real GGUF model) goes through
these, so every backend speaks the same dialect.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from contreact.stub.embedding import embed_text
from contreact.text import tokens
from contreact.text.tool_text import listed_tools, written_calls

__all__ = [
    "CHAT_CAPABILITIES",
    "DEFAULT_EMBEDDING_MODELS",
    "DEFAULT_MODELS",
    "EMBEDDING_CAPABILITIES",
    "OLLAMA_VERSION",
    "ChatRequest",
    "Reply",
    "ServedModel",
    "canonical_model_name",
    "chat_lines",
    "decode_body",
    "embed_body",
    "estimate_tokens",
    "format_branches",
    "format_tool_names",
    "message_text",
    "split_text",
    "whole_chat_body",
]

OLLAMA_VERSION = "0.12.6"
"""The Ollama version whose API the stub speaks (and says it speaks, beside its own name)."""
DEFAULT_MODELS: tuple[str, ...] = ("stub-model",)
DEFAULT_EMBEDDING_MODELS: tuple[str, ...] = ("stub-embed",)
CHAT_CAPABILITIES: tuple[str, ...] = ("completion", "tools")
EMBEDDING_CAPABILITIES: tuple[str, ...] = ("embedding",)

# Synthetic per-token timings (ns): plausible numbers so tokens/s displays have
# something to show; wall time still bounds total_duration from below.
_LOAD_NS = 1_000_000
_PROMPT_NS_PER_TOKEN = 100_000
_EVAL_NS_PER_TOKEN = 1_000_000

_CYCLE_RE = re.compile(r"\bCycle (\d+)\b")


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
    """Estimate a token count with the estimate contreact sizes its prompts by (one estimator).

    Args:
        text: Any text.

    Returns:
        `contreact.text.tokens.estimate_tokens`, at least 1 so counters never read zero
        for real traffic.
    """
    return max(1, tokens.estimate_tokens(text))


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
        match = _CYCLE_RE.search(message_text(self.messages[index].get("content")))
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
            text = message_text(message.get("content"))
            bare = _bare_call(text)
            calls.extend([bare] if bare else written_calls(text))
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
        """Whether the client offered any tools (natively, as text, or in ``format``)."""
        return bool(self.tools) or bool(self.text_tool_names) or bool(self.format_tool_names)

    @property
    def format_tool_names(self) -> list[str]:
        """Tools the request's ``format`` admits a call of (contreact's constrained mode)."""
        return format_tool_names(self.format)

    @property
    def text_tool_names(self) -> list[str]:
        """Tools described in the system prompt in text-tool mode (none bound natively).

        contreact lists them as `- name(...)` lines after a `<tool_call>` example.
        """
        if self.tools or not self.messages or self.messages[0].get("role") != "system":
            return []
        return listed_tools(message_text(self.messages[0].get("content")))

    @property
    def tool_names(self) -> list[str]:
        """Names of the offered tools, in the order the client sent them."""
        if not self.tools:
            return self.text_tool_names or self.format_tool_names
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
                return message_text(message.get("content"))
        return ""


def decode_body(raw: bytes) -> tuple[Any, str]:
    """Decode a request's JSON object body; returns (body, error text), as Ollama words it."""
    try:
        body = json.loads(raw or b"{}")
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        return None, f"invalid JSON body: {exc}"
    if not isinstance(body, dict):
        return body, "request body must be a JSON object"
    return body, ""


def message_text(value: Any) -> str:
    """A message's ``content`` as text (``""`` when absent or not a string)."""
    return value if isinstance(value, str) else ""


def format_branches(answer_format: Any) -> list[Mapping[str, Any]]:
    """The alternatives of a ``format`` schema: its ``anyOf``/``oneOf``, else itself."""
    if not isinstance(answer_format, Mapping):
        return []
    branches = answer_format.get("anyOf", answer_format.get("oneOf"))
    if isinstance(branches, list):
        return [b for b in branches if isinstance(b, Mapping)]
    return [answer_format]


def format_tool_names(answer_format: Any) -> list[str]:
    """The tools a ``format`` schema admits a call of (contreact's constrained tool mode).

    A call branch is an object whose ``name`` property is a constant:
    ``{"properties": {"name": {"const": "read"}, "arguments": {...}}}``.
    """
    names = []
    for branch in format_branches(answer_format):
        properties = branch.get("properties")
        name = properties.get("name") if isinstance(properties, Mapping) else None
        if isinstance(name, Mapping) and isinstance(name.get("const"), str):
            names.append(name["const"])
    return names


def _bare_call(text: str) -> dict[str, Any] | None:
    """A call written as constrained mode's format admits it: the whole text one JSON call."""
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        return None
    arguments = value.get("arguments")
    if not isinstance(arguments, dict):
        return None
    return {"name": value["name"], "arguments": arguments}


@dataclass
class Reply:
    """What the stub model answers.

    Attributes:
        content: Assistant text (may itself contain text-format tool calls).
        tool_calls: Native tool calls, each ``{"name": str, "arguments": dict}``.
        thinking: Reasoning text, sent as ``message.thinking`` only when the request
            asked for thinking.
        done_reason: The final chunk's ``done_reason`` (``"stop"``, ``"length"``, ...).
        usage: Measured token counts and durations (a real model); ``None`` for a
            scripted answer, whose counts are estimated.
    """

    content: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    thinking: str = ""
    done_reason: str = "stop"
    usage: Usage | None = None


# ------------------------------------------------------------------------ responses


def now_iso() -> str:
    """The current time as Ollama writes ``created_at`` (UTC, microseconds, ``Z``)."""
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def split_text(text: str, parts: int) -> list[str]:
    """Split ``text`` at spaces into at most ``parts`` pieces that concatenate back to it.

    Real Ollama streams a token at a time; a few pieces are enough to prove the client
    reassembles a stream without flooding tests with chunks.
    """
    if not text:
        return []
    cuts = [0]
    for i in range(1, parts):
        pos = text.find(" ", len(text) * i // parts)
        if pos > cuts[-1]:
            cuts.append(pos)
    cuts.append(len(text))
    return [text[a:b] for a, b in zip(cuts, cuts[1:], strict=False) if b > a]


@dataclass(frozen=True)
class ServedModel:
    """A model the server lists: its (tagged) name and Ollama capabilities."""

    name: str
    capabilities: tuple[str, ...]

    @property
    def is_embedding(self) -> bool:
        """Whether this is an embedding model rather than a chat model."""
        return "embedding" in self.capabilities


def _wire_calls(calls: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [{"function": {"name": c["name"], "arguments": c.get("arguments") or {}}} for c in calls]


@dataclass(frozen=True)
class Usage:
    """Token counts and durations (ns) of one answer, as the ``done`` line carries them."""

    prompt_eval_count: int
    eval_count: int
    prompt_eval_duration: int
    eval_duration: int
    load_duration: int
    total_duration: int


def synthetic_usage(req: ChatRequest, reply: Reply, started_ns: int) -> Usage:
    """Estimated counts and plausible durations for an answer no model generated."""
    thinking = reply.thinking if req.thinking_requested else ""
    prompt_text = "".join(
        content for m in req.messages if isinstance(content := m.get("content"), str)
    )
    output_text = (
        thinking + reply.content + (json.dumps(reply.tool_calls) if reply.tool_calls else "")
    )
    prompt_tokens = estimate_tokens(prompt_text)
    eval_tokens = estimate_tokens(output_text)
    prompt_ns = prompt_tokens * _PROMPT_NS_PER_TOKEN
    eval_ns = eval_tokens * _EVAL_NS_PER_TOKEN
    wall_ns = time.monotonic_ns() - started_ns
    return Usage(
        prompt_eval_count=prompt_tokens,
        eval_count=eval_tokens,
        prompt_eval_duration=prompt_ns,
        eval_duration=eval_ns,
        load_duration=_LOAD_NS,
        total_duration=max(wall_ns, _LOAD_NS + prompt_ns + eval_ns),
    )


def done_line(model: str, done_reason: str, usage: Usage) -> dict[str, Any]:
    """The final ``done: true`` line of a chat answer."""
    return {
        "model": model,
        "created_at": now_iso(),
        "message": {"role": "assistant", "content": ""},
        "done": True,
        "done_reason": done_reason,
        "total_duration": usage.total_duration,
        "load_duration": usage.load_duration,
        "prompt_eval_count": usage.prompt_eval_count,
        "prompt_eval_duration": usage.prompt_eval_duration,
        "eval_count": usage.eval_count,
        "eval_duration": usage.eval_duration,
    }


def chat_lines(
    req: ChatRequest, reply: Reply, started_ns: int, usage: Usage | None = None
) -> list[dict[str, Any]]:
    """Build the NDJSON stream for ``reply``; the last line is the ``done`` line.

    Args:
        req: The request answered.
        reply: The answer.
        started_ns: ``time.monotonic_ns()`` when the request arrived.
        usage: Measured counts and durations; estimated when ``None``.

    Returns:
        The stream's lines, in order.
    """
    head = {"model": req.model, "created_at": now_iso()}
    lines: list[dict[str, Any]] = []
    thinking = reply.thinking if req.thinking_requested else ""
    for piece in split_text(thinking, 3):
        lines.append(
            {
                **head,
                "message": {"role": "assistant", "content": "", "thinking": piece},
                "done": False,
            }
        )
    for piece in split_text(reply.content, 4):
        lines.append({**head, "message": {"role": "assistant", "content": piece}, "done": False})
    if reply.tool_calls:
        lines.append(
            {
                **head,
                "message": {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": _wire_calls(reply.tool_calls),
                },
                "done": False,
            }
        )
    usage = usage if usage is not None else synthetic_usage(req, reply, started_ns)
    lines.append(done_line(req.model, reply.done_reason, usage))
    return lines


def whole_chat_body(req: ChatRequest, reply: Reply, done: Mapping[str, Any]) -> dict[str, Any]:
    """The body of a ``stream: false`` answer: the ``done`` line with the whole message."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.thinking and req.thinking_requested:
        message["thinking"] = reply.thinking
    if reply.tool_calls:
        message["tool_calls"] = _wire_calls(reply.tool_calls)
    return {**done, "message": message}


def embed_body(model: str, texts: Sequence[str], started_ns: int) -> dict[str, Any]:
    """The ``/api/embed`` answer for ``texts``."""
    return {
        "model": model,
        "embeddings": [embed_text(t) for t in texts],
        "total_duration": max(time.monotonic_ns() - started_ns, _LOAD_NS),
        "load_duration": _LOAD_NS,
        "prompt_eval_count": sum(estimate_tokens(t) for t in texts),
    }
