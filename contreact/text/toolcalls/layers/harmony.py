"""gpt-oss "harmony" messages: channels, recipients and calls, unwrapped before parsing.

A gpt-oss answer that reaches us raw is a series of messages such as
``<|channel|>analysis<|message|>...<|end|>`` (reasoning),
``<|channel|>commentary to=functions.write <|constrain|>json<|message|>{...}<|call|>``
(a tool call: the recipient names the tool, the body is its JSON arguments) and
``<|channel|>final<|message|>...`` (the answer). The recipient may also stand before the
channel (``<|start|>assistant to=functions.write<|channel|>commentary json<|message|>``).
Analysis is thinking, final and commentary without recipient are visible text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from contreact.text.toolcalls.calls import Attempt
from contreact.text.toolcalls.layers.dialects import json_call
from contreact.text.toolcalls.outcomes import ToolSchemas

_MESSAGE = re.compile(r"<\|message\|>")
_STOP = re.compile(r"<\|(?:end|call|return|start)\|>")
_CHANNEL = re.compile(r"<\|channel\|>[ \t]*(\w+)")
_RECIPIENT = re.compile(r"\bto=([^\s<]+)")
_MARKERS = ("<|channel|>", "<|message|>", "<|constrain|>")


@dataclass(frozen=True)
class Harmony:
    """A harmony message unwrapped: what is visible, what was thought, and the calls."""

    visible: str
    thinking: str
    calls: list[Attempt]


def unwrap_harmony(text: str, schemas: ToolSchemas) -> Harmony | None:
    """The harmony messages in ``text``, or None when it carries no harmony markup."""
    if "<|message|>" not in text or not any(marker in text for marker in _MARKERS[::2]):
        return None
    visible: list[str] = []
    thinking: list[str] = []
    calls: list[Attempt] = []
    boundary = 0
    for message in _MESSAGE.finditer(text):
        if message.start() < boundary:
            continue
        header = text[boundary : message.start()]
        stop = _STOP.search(text, message.end())
        body = text[message.end() : stop.start() if stop else len(text)]
        boundary = stop.end() if stop else len(text)
        channel = _CHANNEL.search(header)
        recipient = _RECIPIENT.search(header)
        if recipient and recipient.group(1) not in ("assistant", "user", "all"):
            calls.append(json_call(message.start(), recipient.group(1), body, schemas))
        elif channel and channel.group(1).lower() == "analysis":
            thinking.append(body.strip())
        else:
            visible.append(body.strip())
    return Harmony("\n\n".join(v for v in visible if v), "\n".join(thinking), calls)
