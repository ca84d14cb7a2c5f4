"""The markup detector: tool-call markup the parser could not read must not become a note.

When no layer reads a call, the message would become the cycle's reflection. If it still
carries tool-call markup (a family's special tokens, call tags, a harmony recipient),
the model tried to call a tool in a dialect or shape the parser does not know, and the
run must say so (a corrective turn) instead of silently keeping markup as its note.
Prose that talks about tools in words, JSON examples and code in other languages is not
markup; neither is markup quoted in inline code or in a fenced block of another language.
"""

from __future__ import annotations

import re

from contreact.text.toolcalls.layers.json_objects import code_blocks, inside

# Each pattern is a literal-led token or tag: no nested quantifiers, so no backtracking.
_MARKUP = re.compile(
    "|".join(
        (
            # Special tokens: <|python_tag|>, <|channel|>, <｜tool▁calls▁begin｜>, ... (the
            # name is checked for a tool word below, not in the pattern: no backtracking).
            r"<[｜|](?P<token>[^<>｜|\n]{1,60})[｜|]>",
            r"<[｜|]DSML[｜|]",
            r"<\|tool_call>|<tool_call\|>",  # Gemma 4
            r"\[(?:TOOL_CALLS|TOOL_REQUEST|ARGS|CALL_ID)\]",
            r"</?(?:tool_call|tool_calls|toolcall|function_calls|tool_use|seed:tool_call"
            r"|minimax:tool_call|start_function_call|end_function_call)\s*>",
            r"<function=[^>\s]",
            r"<invoke\s+name=",
            r"<tool>[^<>\n]{1,200}</tool>",
            r"<tool_input>",
            r"\bto=functions\.",
            r"\bfunctools\[",
            r"^>>>[ \t]*(?!all\b)[^\W\d]",  # Functionary v3.2 recipients (">>>all" is text)
            r"^[ \t]*```(?:tool_code|tool_call|tool_calls)\b",
        )
    ),
    re.IGNORECASE | re.MULTILINE,
)
# Every pattern above starts with one of these; text without any of them has no markup.
_MAY_HOLD_MARKUP = re.compile(r"[<\[]|to=|functools|>>>|```")
_INLINE_CODE = re.compile(r"`[^`\n]{1,300}`")
_TOOL_WORDS = re.compile(
    r"tool|call|function|python|plugin|action|channel|constrain|recipient|message|dsml",
    re.IGNORECASE,
)


def find_markup(text: str) -> str | None:
    """The first tool-call markup in ``text`` outside quoted code, or None."""
    if not _MAY_HOLD_MARKUP.search(text):
        return None  # plain prose: skip the scan
    quoted = _merged(
        code_blocks(text) + [(m.start(), m.end()) for m in _INLINE_CODE.finditer(text)]
    )
    for match in _MARKUP.finditer(text):
        token = match.group("token")
        if token is not None and not _TOOL_WORDS.search(token):
            continue  # <|im_end|>, <|eot_id|>: not about tools
        if not inside(match.start(), quoted):
            return match.group(0)
    return None


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged
