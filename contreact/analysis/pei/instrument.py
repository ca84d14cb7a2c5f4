"""The PEI instrument: the question evaluators answer, read from its bundled file.

The text is Szeider's Box 2, kept in `contreact/data/pei_instrument.txt` under a citation
header that documents its source and is never sent to a model. A rating stores the
fingerprint of the text it was asked with, so ratings asked with another text are told apart.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from contreact.analysis.runs import AnalysisInputError

INSTRUMENT_FILE = Path(__file__).resolve().parents[2] / "data" / "pei_instrument.txt"


def load_instrument(path: str | Path | None = None) -> str:
    """The PEI prompt text, without the file's citation header.

    The header is every line starting with `#` at the top of the file; it documents where
    the text comes from and is never sent to a model.

    Args:
        path: Another instrument file (default: the bundled Box 2 text).

    Raises:
        AnalysisInputError: The file cannot be read or holds no text after the header.
    """
    file = Path(path) if path else INSTRUMENT_FILE
    try:
        lines = file.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise AnalysisInputError(f"cannot read the PEI instrument {file}: {exc}") from None
    while lines and lines[0].startswith("#"):
        lines.pop(0)
    text = "\n".join(lines).strip()
    if not text:
        raise AnalysisInputError(f"the PEI instrument {file} has no text after its header")
    return text


def instrument_sha(text: str) -> str:
    """A fingerprint of the instrument text a rating was asked with."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
