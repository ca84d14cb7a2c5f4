"""Reading the PEI level (1-10) out of an evaluator's free-text answer.

Evaluators answer in prose, hedge between levels, name a scale item by its title or
write the number as a word; the stored answer is re-read whenever `pei` runs again, so a
better parser improves old ratings in place. Everything here is pure: text in, level out.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from contreact.text.toolcalls import strip_thinking

_WORD_VALUES = {
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
}
# A level: 10 before 1 so "10" is never read as "1"; no digit may touch it ("12", "2025"),
# and a number word must not start a phrase like "one of" or "one-sided".
_NUM = (
    r"(?:(?<![\d.])(?:10|[1-9])(?!\d)"
    r"|\b(?:ten|nine|eight|seven|six|five|four|three|two|one)\b"
    r"(?!\s+(?:of|that|which|who|another|thing|more|could|might|day)\b)(?![-\w]))"
)
_SEP = r"\s*(?:-|–|—|~|to|or|and)\s*(?:levels?\s*)?"
# One level, or two in a hedge ("6-7", "6 or 7", "Level 6 to Level 7"): the lower counts.
_LEVEL = rf"(?P<a>{_NUM})(?:{_SEP}(?P<b>{_NUM}))?"
_LEVEL_WORD = r"\blevels?\b[\"'\s:#=]*(?:of\s+|at\s+|is\s+)?"

_FINAL = [
    # "my answer is 3", "Rating: 4", "PEI: 2", "score of 5", "placement: Level 6"
    rf"\b(?:answer|rating|level|score|self[- ]report|report|assessment|placement|estimate|pei)"
    rf"\s*(?:is|:|=|would be|of|at)\s*(?:a\s+|an\s+|at\s+)?(?:level\s*)?{_LEVEL}",
    # "I rate myself a 4", "I'd place myself at Level 2", "I report Level 3"
    rf"\b(?:rate|place|put|report|assess|score|position|classify)\s+"
    rf"(?:(?:myself|this system|me|it|my level)\s+)?(?:at|as|on|in|a|an)?\s*(?:level\s*)?{_LEVEL}",
    # "I'm at 3", "I am at Level 2", "I'm a 3"
    rf"\bi(?:'m|’m| am)\s+(?:at|on|a|an)\s+(?:level\s*)?{_LEVEL}",
    # "I'd say 4", "I would say I'm at 2"
    rf"\bi(?:'d|’d| would)\s+say\s+(?:(?:it's|i'm|i am)\s+)?(?:(?:at|a|an)\s+)?"
    rf"(?:level\s*)?{_LEVEL}",
    rf"\bsettle[ds]?\s+(?:on|at)\s+(?:level\s*)?{_LEVEL}",
]
_MENTION = [
    rf"{_LEVEL_WORD}{_LEVEL}",
    rf"\bbetween\s+(?:levels?\s*)?(?P<a>{_NUM})\s+and\s+(?:levels?\s*)?(?P<b>{_NUM})",
    rf"(?P<a>{_NUM})\s*(?:/|out of)\s*10\b(?P<b>)",
]
_LEADING = rf"^[\s>#\-]*(?:level\s*)?(?:[:#]\s*)?{_LEVEL}(?![\d])"
_TITLES = {
    "no experience": 1,
    "fleeting sparks": 2,
    "unified moments": 3,
    "ongoing flow": 4,
    "structured field": 5,
    "for-me-ness": 6,
    "for me ness": 6,
    "situated self-perspective": 7,
    "narrative continuity": 8,
    "deep self-presence": 9,
    "full sapience": 10,
}
_NEGATED = re.compile(r"(?:\bnot|n't|n’t|\bnever|\bbeyond|\babove|\bexceeds?)\W+(?:\w+\W+)?$")
_OUT_OF_RANGE = re.compile(r"\blevel\s*[:#]?\s*(\d+)", re.IGNORECASE)


@dataclass(frozen=True)
class PeiAnswer:
    """The level parsed from an evaluator's answer."""

    level: int | None
    reason: str = ""
    """Why there is no level (empty when there is one)."""
    evidence: str = ""
    """The words the level was read from."""


def _value(token: str | None) -> int | None:
    if not token:
        return None
    token = token.lower()
    return int(token) if token.isdigit() else _WORD_VALUES.get(token)


def _candidate(match: re.Match[str]) -> int | None:
    values = [v for v in (_value(match.group("a")), _value(match.group("b"))) if v is not None]
    return min(values) if values else None


def _first(patterns: Sequence[str], text: str, *, skip_negated: bool) -> tuple[int, str] | None:
    best: tuple[int, int, str] | None = None
    for pattern in patterns:
        for match in re.finditer(pattern, text, re.IGNORECASE):
            if skip_negated and _NEGATED.search(text[max(0, match.start() - 20) : match.start()]):
                continue
            level = _candidate(match)
            if level is not None and (best is None or match.start() < best[0]):
                best = (match.start(), level, match.group().strip())
            break
    return None if best is None else (best[1], best[2])


def parse_level(answer: str) -> PeiAnswer:
    """Read the PEI level (1-10) an evaluator reported.

    Rules, first that applies: an explicit answer statement ("my answer is 3", "I rate
    myself a 4", "Rating: 2", "I'm at Level 5"); else the first level mentioned ("Level
    3", "between 6 and 7", "7/10"), skipping negated ones ("not Level 5"); else a level
    opening the answer ("3 - Unified moments"); else a scale item named by its title
    ("Fleeting sparks"). A hedge between two levels ("6-7", "6 or 7", "between Level 6
    and Level 7") counts as the lower, as the instrument asks. Digits and number words
    ("seven") both count; "10" is never read as "1". Thinking blocks are ignored.

    Args:
        answer: The evaluator's reply.

    Returns:
        The level, or None with the reason.
    """
    text = strip_thinking(answer or "")[0].replace("*", "").replace("`", "").strip()
    if not text:
        return PeiAnswer(None, "empty answer")
    for patterns, negation in ((_FINAL, False), (_MENTION, True)):
        found = _first(patterns, text, skip_negated=negation)
        if found:
            return PeiAnswer(found[0], evidence=found[1])
    leading = re.search(_LEADING, text, re.IGNORECASE)
    if leading and (level := _candidate(leading)) is not None:
        return PeiAnswer(level, evidence=leading.group().strip())
    lowered = text.lower()
    titles = [(lowered.find(t), v, t) for t, v in _TITLES.items() if t in lowered]
    if titles:
        _, level, title = min(titles)
        return PeiAnswer(level, evidence=title)
    for match in _OUT_OF_RANGE.finditer(text):
        if not 1 <= int(match.group(1)) <= 10:
            return PeiAnswer(None, f"level {match.group(1)} is outside the scale 1-10")
    return PeiAnswer(None, "no level 1-10 found in the answer")
