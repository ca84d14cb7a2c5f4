"""How many tokens a text costs, estimated without a tokenizer.

Why this module exists: the prompt of every model call is sized before it is sent
(Ollama silently truncates one that exceeds ``num_ctx``, from the front), a PEI history is
fitted to the evaluator's context, and the bundled stub reports token counts as Ollama
would. All of them must count alike, so there is one estimate, here.

The estimate is deliberately simple and tokenizer-free (it runs before every model call,
for any model): about 4 characters per token for Latin-script text, about 1.5 for CJK,
and, a conservative middle ground this module adds, 2 for other scripts (Cyrillic,
Greek, Arabic, emoji ...), which tokenizers split much finer than English.
"""

from __future__ import annotations

import re
from functools import lru_cache

# Han (incl. extensions and compatibility ideographs), Hiragana, Katakana, Hangul
# (syllables and jamo), CJK symbols/punctuation and full-width forms.
_CJK = re.compile(
    "["
    "\u1100-\u11ff"  # Hangul Jamo
    "\u3000-\u303f"  # CJK symbols and punctuation
    "\u3040-\u309f"  # Hiragana
    "\u30a0-\u30ff"  # Katakana
    "\u3130-\u318f"  # Hangul compatibility jamo
    "\u31f0-\u31ff"  # Katakana phonetic extensions
    "\u3400-\u4dbf"  # Han extension A
    "\u4e00-\u9fff"  # Han
    "\uac00-\ud7af"  # Hangul syllables
    "\uf900-\ufaff"  # Han compatibility ideographs
    "\uff00-\uffef"  # half-/full-width forms
    "\U00020000-\U0003134f"  # Han extensions B-G
    "]"
)
# Latin script and what English text is made of: ASCII, Latin-1, Latin Extended A/B,
# IPA, spacing modifiers, combining marks, Latin Extended Additional, general punctuation.
_NOT_LATIN = re.compile("[^\u0000-\u036f\u1e00-\u1eff\u2000-\u206f]")


# Every step re-estimates the system text and the cycle's turns, which rarely change.
@lru_cache(maxsize=512)
def estimate_tokens(text: str) -> int:
    """Estimate how many tokens ``text`` costs, without a tokenizer.

    Args:
        text: Any text.

    Returns:
        ``ceil(latin / 4 + other / 2 + cjk / 1.5)`` characters-per-token, 0 for ``""``.
    """
    if not text:
        return 0
    cjk = len(_CJK.findall(text))
    non_latin = len(_NOT_LATIN.findall(text))
    latin = len(text) - non_latin
    other = non_latin - cjk
    # In twelfths of a token to stay in integers: 1/4 = 3/12, 1/2 = 6/12, 1/1.5 = 8/12.
    twelfths = 3 * latin + 6 * other + 8 * cjk
    return -(-twelfths // 12)
