r"""Text from a model, a tool or an operator, made safe to print on a terminal.

A model can write anything, including the bytes a terminal obeys: `ESC ] 0 ; title BEL`
renames the window, `ESC [ 2 J` clears the screen, OSC 52 writes the clipboard, a bare
`\r` overwrites the line before it, and bidi overrides reorder what a reader sees. Printed
raw by `show`, `status`, `export` or a progress line, that text would act on the
operator's terminal instead of being read. Every such character is shown as a visible
escape (`\x1b`, `\x07`, `\u202e`) so the text stays readable and inert; newline and tab
stay as they are. A lone surrogate (which no terminal encoding can write) is shown the
same way instead of crashing the print. JSON output needs none of this: JSON escapes
control characters itself.
"""

from __future__ import annotations

import re

# C0 controls (but newline and tab), DEL, C1 controls, bidi embeddings/overrides/isolates,
# line and paragraph separators, and lone surrogates.
_UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)


def _shown(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def visible(text: object) -> str:
    """`text` as a string whose terminal control characters are shown, not obeyed."""
    return _UNSAFE.sub(_shown, str(text))
