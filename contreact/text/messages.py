"""Inputs echoed in one-line messages, cut to a readable length.

A refused input echoed whole (a pasted file as a run id, say) makes an error line of
kilobytes. An input quoted in a message keeps its beginning and end and says how long it was.
"""

from __future__ import annotations


def cut(text: str, limit: int = 80) -> str:
    """`text`, or its beginning and end with the length when it is longer than `limit`.

    For inputs echoed in a message (a run id, a host, a value): the line stays readable
    and still says what was given and what to do, whatever was typed.
    """
    if len(text) <= limit:
        return text
    tail = max(limit // 4, 1)
    head = max(limit - tail - 1, 1)
    return f"{text[:head]}…{text[-tail:]} ({len(text):,} characters)"
