"""What real small models do to an answer, detected: truncation, echoes, invented turns.

Scripted models answer cleanly; real small ones do not. Gemma 3 270M runs every answer to
`num_predict` (`done_reason: "length"`), repeats its system prompt as its "reflection",
and writes the conversation on by itself ("Cycle 2 begins.", "<start_of_turn>user").
None of that may pass as a normal reflection: a truncated or echoed note is flagged, and
an invented turn is cut off (everything after it is the model playing both sides) and
flagged. Pure functions; `invoke` flags the answer on its LLM_INVOCATION event, `parse`
cuts and flags the cycle.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ECHO_FLAG",
    "INVENTED_TURN_FLAG",
    "TRUNCATED_FLAG",
    "Cut",
    "answer_flags",
    "cut_invented_turn",
    "echo_fraction",
    "is_echo",
]

TRUNCATED_FLAG = "truncated"
"""The answer stopped at `num_predict` or the context's end (`done_reason: "length"`)."""
ECHO_FLAG = "echoed_prompt"
"""The reflection mostly repeats the system prompt or the cycle's earlier turns."""
INVENTED_TURN_FLAG = "invented_turn"
"""The answer went on to write a turn that is not the model's (cut there)."""

# A turn marker of a chat template anywhere; a tool result or a speaker label opening a
# line (a prose mention of "<tool_response> tags" is an echo of the prompt, not a turn).
_ROLE_MARKER = re.compile(
    r"<start_of_turn>|<end_of_turn>|<\|im_start\|>|<\|im_end\|>|<\|start_header_id\|>"
    r"|^[ \t]*<tool_response\b"
    r"|^[ \t]*(?:user|human|system)[ \t]*:",
    re.IGNORECASE | re.MULTILINE,
)
# contreact's own opening turn, as the model copies it to start another cycle.
_CYCLE_OPENING = re.compile(r"^[ \t]*\**Cycle (\d+) begins\b", re.IGNORECASE | re.MULTILINE)
_WORD = re.compile(r"\w+")

ECHO_SHINGLE = 5
"""Words per shingle: five words in a row shared with the prompt is copying, not chance."""
ECHO_THRESHOLD = 0.6
"""A reflection is an echo when at least this share of its words sits in copied shingles."""


@dataclass(frozen=True)
class Cut:
    """An answer with any invented turn removed."""

    text: str
    marker: str | None = None
    """What the invented turn began with (None: nothing was cut)."""


def cut_invented_turn(text: str, cycle: int) -> Cut:
    """Cut `text` at the first turn the model invented.

    Invented: a chat-template turn marker or a `user:` / `human:` / `system:` label at a
    line start, anywhere; a `Cycle N begins` line after other text, or naming a later
    cycle than `cycle`. An answer that only repeats this cycle's opening is not cut (it
    is an echo, flagged as one).
    """
    cuts: list[tuple[int, str]] = []
    role = _ROLE_MARKER.search(text)
    if role is not None:
        cuts.append((role.start(), role.group(0).strip()))
    for match in _CYCLE_OPENING.finditer(text):
        if text[: match.start()].strip() or int(match.group(1)) > cycle:
            cuts.append((match.start(), match.group(0).strip()))
            break
    if not cuts:
        return Cut(text)
    at, marker = min(cuts)
    return Cut(text[:at].rstrip(), marker)


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def echo_fraction(text: str, sources: Iterable[str]) -> float:
    """The share of `text`'s words inside a run of `ECHO_SHINGLE` words found in `sources`.

    A text shorter than one shingle counts as wholly echoed when its words appear in
    that order in a source (a bare "Cycle 1 begins." after the opening turn said so).
    """
    words = _words(text)
    if not words:
        return 0.0
    source_words = [_words(s) for s in sources]
    if len(words) < ECHO_SHINGLE:
        needle = " " + " ".join(words) + " "
        return 1.0 if any(needle in " " + " ".join(s) + " " for s in source_words) else 0.0
    known = {
        tuple(s[i : i + ECHO_SHINGLE])
        for s in source_words
        for i in range(len(s) - ECHO_SHINGLE + 1)
    }
    covered = [False] * len(words)
    for i in range(len(words) - ECHO_SHINGLE + 1):
        if tuple(words[i : i + ECHO_SHINGLE]) in known:
            for j in range(i, i + ECHO_SHINGLE):
                covered[j] = True
    return sum(covered) / len(words)


def is_echo(text: str, sources: Iterable[str]) -> bool:
    """Whether `text` is mostly a copy of `sources` (see `ECHO_THRESHOLD`)."""
    return echo_fraction(text, sources) >= ECHO_THRESHOLD


def answer_flags(record: Mapping[str, Any], cycle: int) -> list[str]:
    """Flags of one model answer for its LLM_INVOCATION event: truncated, invented turn."""
    flags = []
    if record.get("done_reason") == "length":
        flags.append(TRUNCATED_FLAG)
    if cut_invented_turn(str(record.get("content") or ""), cycle).marker is not None:
        flags.append(INVENTED_TURN_FLAG)
    return flags
