"""Thinking blocks: separating what the model thought from what it said.

Thinking models wrap their reasoning in ``<think>`` / ``<thinking>`` blocks (Command R7B
in ``<|START_THINKING|>`` tokens); it must never be parsed as a call nor leak into a
reflection, so it is removed before every text layer and before a reflection is taken.
"""

from __future__ import annotations

import re

from contreact.text.toolcalls.text import content_text

_THINK_TAG = re.compile(
    r"<(?P<close>/?)(?:think|thinking|seed:think)\s*>|<\|(?P<token>START|END)_THINKING\|>",
    re.IGNORECASE,
)


def strip_thinking(text: str) -> tuple[str, str]:
    """Separate visible text from the model's thinking.

    Removes ``<think>…</think>``, ``<thinking>…</thinking>`` and Command R7B's
    ``<|START_THINKING|>…<|END_THINKING|>`` and Seed-OSS's ``<seed:think>`` blocks (any case, over
    several lines; the first closing tag ends a block). An opening tag that is never
    closed hides everything after it. A closing tag with no opening tag means the chat
    template opened the block in the prompt (qwen3, deepseek-r1 do this), so everything
    before it is thinking.

    Args:
        text: The raw message content.

    Returns:
        ``(visible, thinking)``: the visible text (not trimmed) and the thinking text
        (blocks trimmed and joined by newlines; ``""`` when there was none).
    """
    if not isinstance(text, str):
        text = content_text(text)
    thinking: list[str] = []
    visible = text
    # Removing a block can splice two halves of a tag together ("<thi<think>x</think>nk>"),
    # so repeat until no tag is left; every pass removes at least one tag, so this ends.
    while _THINK_TAG.search(visible):
        visible, found = _strip_thinking_once(visible)
        thinking.extend(found)
    return visible, "\n".join(part.strip() for part in thinking if part.strip())


def _strip_thinking_once(text: str) -> tuple[str, list[str]]:
    # Blocks do not nest: like the models' own templates and Ollama's parser, the first
    # closing tag ends the block, and an opening tag inside a block is just thinking.
    visible: list[str] = []
    thinking: list[str] = []
    in_block = False
    block_start = 0
    pos = 0
    for match in _THINK_TAG.finditer(text):
        closing = bool(match.group("close")) or (match.group("token") or "").upper() == "END"
        if in_block:
            if closing:
                thinking.append(text[block_start : match.start()])
                in_block = False
                pos = match.end()
            continue
        visible.append(text[pos : match.start()])
        if closing:  # stray closing tag: the block was opened by the prompt template
            thinking.append("".join(visible))
            visible = []
            pos = match.end()
        else:
            in_block = True
            block_start = match.end()
    if in_block:
        thinking.append(text[block_start:])
    else:
        visible.append(text[pos:])
    return "".join(visible), thinking
