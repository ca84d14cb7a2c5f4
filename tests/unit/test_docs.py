"""The docs name files that exist: every repository path they quote is one.

Files move (this repository's tests moved into tests/unit and tests/e2e, checkpoints/db.py
was split); a doc that still names the old path sends a reader nowhere. Links are checked
by tests/e2e/test_readme.py; this checks the paths quoted as code.
"""

from __future__ import annotations

import re

from support.paths import ROOT

QUOTED_PATH = re.compile(
    r"`((?:contreact|tests|benchmarks|examples|scripts|docs)/[\w./-]+\.(?:py|ya?ml|md|json|txt))`"
)


def quoted_paths() -> list[tuple[str, str]]:
    docs = [ROOT / "README.md", ROOT / "benchmarks" / "README.md", *(ROOT / "docs").glob("*.md")]
    return [
        (str(doc.relative_to(ROOT)), path)
        for doc in docs
        for path in QUOTED_PATH.findall(doc.read_text(encoding="utf-8"))
    ]


def test_every_path_the_docs_quote_exists() -> None:
    quoted = quoted_paths()
    assert len(quoted) >= 20, f"only {len(quoted)} quoted paths found: is the pattern right?"
    missing = [f"{doc}: {path}" for doc, path in quoted if not (ROOT / path).exists()]
    assert missing == []
