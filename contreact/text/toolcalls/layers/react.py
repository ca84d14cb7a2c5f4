"""Layer 4: ReAct text, ``Action: tool`` + ``Action Input: {...}`` (and its variants).

The LangChain ReAct format and what models make of it: ``Action: tool: input``,
``Action: tool(input)``, the tool name on the line after ``Action:``, a comment in
parentheses (``Action: write (store a note)``) before the ``Action Input:``, Markdown
emphasis and numbering (``**Action 1:**``). With a ``Final Answer:`` the model has
finished and only actions naming a real tool still count.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, TypeAlias

from contreact.text.toolcalls.calls import Attempt, broken, build_call, call_from_input, known
from contreact.text.toolcalls.outcomes import ToolSchemas
from contreact.text.toolcalls.placeholders import is_placeholder_name
from contreact.text.toolcalls.text import preview, unquote

# All anchored at a line start (used with .match on one line). Optional groups start
# with a mandatory character so that no two adjacent quantifiers compete for the same
# characters (that is what makes a regex backtrack catastrophically).
_LEAD = r"[ \t]*(?:[*_#>]+[ \t]*)?"
_TAIL = r"(?:[ \t]*\d+)?(?:[*_]+)?[ \t]*:(?:[*_]+)?"
_ACTION_LINE = re.compile(_LEAD + r"action" + _TAIL + r"(?P<rest>.*)", re.I | re.S)
_INPUT_LINE = re.compile(_LEAD + r"action[ \t_]*input" + _TAIL + r"(?P<rest>.*)", re.I | re.S)
_FINAL_LINE = re.compile(_LEAD + r"final[ \t_]*answer" + _TAIL + r"(?P<rest>.*)", re.I | re.S)
_OTHER_MARKER = re.compile(
    _LEAD + r"(?:thought|observation)" + _TAIL + r"(?P<rest>.*)", re.I | re.S
)
_ACTION_NAME = re.compile(r"""[`"'\[*]*(?P<name>[^\W\d][\w.\-]*)[`"'\]*]*""")
_NOT_AN_ACTION = frozenset(
    {"", "none", "n/a", "na", "nothing", "null", "no action", "no tool", "finish", "done"}
)
_FINAL_ACTION = "final answer"

_LineKind: TypeAlias = Literal["action", "input", "final", "marker", "text"]
# "Action Input:" must be tried before "Action:" (the latter would not match it anyway,
# but the order documents the intent).
_MARKER_PATTERNS: tuple[tuple[_LineKind, re.Pattern[str]], ...] = (
    ("input", _INPUT_LINE),
    ("action", _ACTION_LINE),
    ("final", _FINAL_LINE),
    ("marker", _OTHER_MARKER),
)


@dataclass(frozen=True)
class _Line:
    pos: int
    kind: _LineKind
    rest: str  # the text after the marker's colon (or the whole line for "text")
    rest_pos: int  # where ``rest`` starts in the scanned text


def _classify_lines(text: str) -> list[_Line]:
    lines: list[_Line] = []
    pos = 0
    for raw in text.splitlines(keepends=True):
        line = raw.rstrip("\r\n")
        kind: _LineKind = "text"
        rest, offset = line, 0
        for candidate, pattern in _MARKER_PATTERNS:
            match = pattern.match(line)
            if match:
                kind, rest, offset = candidate, match.group("rest"), match.start("rest")
                break
        lines.append(_Line(pos, kind, rest, pos + offset))
        pos += len(raw)
    return lines


def _region(lines: Sequence[_Line], index: int) -> str:
    """The marker's own rest-of-line plus the plain lines that follow it."""
    parts = [lines[index].rest]
    for line in lines[index + 1 :]:
        if line.kind != "text":
            break
        parts.append(line.rest)
    return "\n".join(parts).strip()


def scan_react(text: str, schemas: ToolSchemas) -> list[Attempt]:
    """The ``Action:`` calls (and unreadable ones) before any ``Final Answer:``."""
    lines = _classify_lines(text)
    final_at = next((i for i, line in enumerate(lines) if line.kind == "final"), len(lines))
    has_final = final_at < len(lines)
    found: list[Attempt] = []
    for index in range(final_at):
        line = lines[index]
        if line.kind != "action":
            continue
        attempt = _react_action(lines, index, schemas)
        if attempt is None:
            continue
        # With an explicit "Final Answer:" the model has finished; stray "Action:" lines
        # in its notes only count when they clearly name one of the tools.
        if has_final and not (attempt.parsed and known(attempt.call.name, schemas)):
            continue
        found.append(attempt)
    return found


def _react_action(lines: Sequence[_Line], index: int, schemas: ToolSchemas) -> Attempt | None:
    line = lines[index]
    rest = line.rest.strip()
    name_line = index
    if not rest:
        # "Action:" with the tool name on the next line.
        following = index + 1
        while following < len(lines) and lines[following].kind == "text":
            candidate = lines[following].rest.strip()
            if candidate:
                if _looks_like_name(candidate) or is_placeholder_name(candidate, schemas):
                    rest, name_line = candidate, following
                break
            following += 1
    if rest.strip("`\"'[]*_ ").lower() in _NOT_AN_ACTION | {_FINAL_ACTION}:
        return None
    given_input = _input_after(lines, name_line)
    if is_placeholder_name(rest, schemas):
        return Attempt(line.pos, build_call(rest, given_input, schemas), parsed=True)
    if rest.startswith("```"):
        # Command-R writes "Action: ```json [...] ```"; the JSON layer reads a readable
        # list, so reaching here means the block held no call.
        return broken(line.pos, "", "the Action's code block holds no readable tool call")
    match = _ACTION_NAME.match(rest)
    if not match:
        return broken(line.pos, "", f"unreadable Action line: {preview(rest)!r}")
    name = match.group("name")
    after = rest[match.end() :].lstrip()
    inline: str | None = None
    if after.startswith(":"):
        inline = after[1:].strip() or None
    elif after.startswith("("):
        # "Action: write (store a note)" + "Action Input: {...}": the parenthesis is a
        # comment when an input follows; otherwise it is the input, "read(notes)".
        close = after.rfind(")")
        inline = (after[1:close] if close > 0 else after[1:]).strip() or None
        if given_input is not None:
            inline = None
    elif after.startswith("{"):
        inline = after
    elif after:
        return broken(
            line.pos,
            name,
            f"unreadable Action line: {preview(rest)!r} (expected 'Action: tool_name' "
            "followed by 'Action Input: {...}', or 'Action: tool_name: input')",
        )
    return call_from_input(line.pos, name, given_input if inline is None else inline, schemas)


def _looks_like_name(text: str) -> bool:
    """A line that is a tool name, maybe with its input: not a sentence of prose."""
    match = _ACTION_NAME.match(text)
    if match is None:
        return False
    return match.end() == len(text) or text[match.end() :].lstrip()[:1] in "(:{"


def _input_after(lines: Sequence[_Line], index: int) -> str | None:
    """The ``Action Input:`` that belongs to the action on line ``index``, if any."""
    for later in range(index + 1, len(lines)):
        if lines[later].kind == "action":
            return None
        if lines[later].kind == "input":
            return _region(lines, later) or None
    return None


def final_answer_text(visible: str) -> str:
    """The final answer: what follows ``Final Answer:``, else the whole visible text."""
    lines = _classify_lines(visible)
    for line in lines:
        if line.kind == "final":
            answer = visible[line.rest_pos :].strip()
            if answer:
                return answer
            # "Final Answer:" with nothing after it: the note is what came before.
            return visible[: line.pos].strip() or visible.strip()
    for index, line in enumerate(lines):
        if line.kind == "action" and line.rest.strip("`\"'[]*_ ").lower() == _FINAL_ACTION:
            # Old LangChain style: "Action: Final Answer" + "Action Input: <answer>".
            for later in range(index + 1, len(lines)):
                if lines[later].kind == "input":
                    answer = unquote(_region(lines, later)).strip()
                    if answer:
                        return answer
                    break
    return visible.strip()
