"""A fake chat model for the tiers that run the graph in-process: the one seam replaced."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatResult


class ScriptedChat(GenericFakeChatModel):
    """A fake chat model that answers from a list and remembers every prompt it was sent."""

    prompts: list[list[BaseMessage]] = []

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChat:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.prompts.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def model(*answers: AIMessage | str) -> ScriptedChat:
    """A chat model that gives `answers` in order (text, or a message with tool calls)."""
    script: Iterator[AIMessage] = iter(
        a if isinstance(a, AIMessage) else AIMessage(content=a) for a in answers
    )
    return ScriptedChat(messages=script, prompts=[])


def tool(name: str, **args: str) -> AIMessage:
    """An answer that calls the tool `name` with `args`."""
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": "x"}])
