"""Ollama's chat templates for the model families the real backend serves, as Python.

A real model must see the prompt Ollama would build, or what contreact learns from it
says nothing about Ollama. Two of Ollama's templates matter here, transcribed from
github.com/ollama/ollama `template/gemma3-instruct.gotmpl` and `template/chatml.gotmpl`
(the templates its library's gemma3 and SmolLM2 models use), with the message collation
of `template/template.go` (`collate`):

* every system message's text is joined (blank line between) into `.System`; system
  messages stay in the list;
* consecutive messages of the same role are merged (blank line between), except `tool`.

Gemma 3 then renders only `user` and `assistant` turns: the system text is folded into
the user turn at index 1 (so a history that starts at an assistant turn loses it), and
`tool` messages are dropped entirely. ChatML renders every role as is.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

__all__ = [
    "FAMILIES",
    "STOP_STRINGS",
    "TEMPLATE_SOURCES",
    "Family",
    "collate",
    "render",
    "render_chatml",
    "render_gemma3",
]

Family = Literal["gemma3", "chatml"]

Message = Mapping[str, Any]

TEMPLATE_SOURCES: dict[Family, str] = {
    "gemma3": (
        "{{- range $i, $_ := .Messages }}\n"
        "{{- $last := eq (len (slice $.Messages $i)) 1 }}\n"
        '{{- if eq .Role "user" }}<start_of_turn>user\n'
        "{{- if and (eq $i 1) $.System }}\n"
        "{{ $.System }}\n"
        "{{ end }}\n"
        "{{ .Content }}<end_of_turn>\n"
        '{{ else if eq .Role "assistant" }}<start_of_turn>model\n'
        "{{ .Content }}<end_of_turn>\n"
        "{{ end }}\n"
        "{{- if $last }}<start_of_turn>model\n"
        "{{ end }}\n"
        "{{- end }}\n"
    ),
    "chatml": (
        "{{- range .Messages }}<|im_start|>{{ .Role }}\n"
        "{{ .Content }}<|im_end|>\n"
        "{{ end }}<|im_start|>assistant\n"
    ),
}
"""The Go templates as Ollama ships them (what `/api/show` reports as `template`)."""

STOP_STRINGS: dict[Family, tuple[str, ...]] = {
    "gemma3": ("<end_of_turn>",),
    "chatml": ("<|im_start|>", "<|im_end|>"),
}
"""The Modelfile `stop` parameters Ollama's library sets for each family."""


def _content(message: Message) -> str:
    content = message.get("content")
    return content if isinstance(content, str) else ""


def collate(messages: Sequence[Message]) -> tuple[str, list[dict[str, str]]]:
    """Ollama's `collate`: the joined system text, and the messages with same-role runs merged."""
    system: list[str] = []
    collated: list[dict[str, str]] = []
    for message in messages:
        role, content = str(message.get("role") or ""), _content(message)
        if role == "system":
            system.append(content)
        if collated and collated[-1]["role"] == role and role != "tool":
            collated[-1]["content"] += "\n\n" + content
        else:
            collated.append({"role": role, "content": content})
    return "\n\n".join(system), collated


def render_gemma3(messages: Sequence[Message]) -> str:
    """The prompt Ollama's gemma3 template builds from `messages`."""
    system, collated = collate(messages)
    out: list[str] = []
    for i, message in enumerate(collated):
        last = i == len(collated) - 1
        if message["role"] == "user":
            out.append("<start_of_turn>user")
            if i == 1 and system:
                out.append(f"\n{system}\n")
            out.append(f"\n{message['content']}<end_of_turn>\n")
        elif message["role"] == "assistant":
            out.append(f"<start_of_turn>model\n{message['content']}<end_of_turn>\n")
        if last:
            out.append("<start_of_turn>model\n")
    # The template file ends with a newline after its range: every prompt ends "model\n\n".
    return "".join(out) + "\n"


def render_chatml(messages: Sequence[Message]) -> str:
    """The prompt Ollama's chatml template builds from `messages`."""
    _, collated = collate(messages)
    turns = [f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in collated]
    return "".join(turns) + "<|im_start|>assistant\n"


FAMILIES: dict[Family, Callable[[Sequence[Message]], str]] = {
    "gemma3": render_gemma3,
    "chatml": render_chatml,
}


def render(family: Family, messages: Sequence[Message]) -> str:
    """The prompt for `messages` in `family`'s template."""
    return FAMILIES[family](messages)
