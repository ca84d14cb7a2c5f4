"""A resident process compiles the engine's statements once, for both backends (issue 30).

`contreact daemon` forks every command from a process that has compiled them, so a
`resume` does not compile the similarity look-up (a 16-way union) at a long run's first
check. Compiling every statement for both dialects also shows each one builds on both.
"""

from __future__ import annotations

import contreact.engine.runner  # noqa: F401 - the engine: every statement made at import
from contreact.checkpoints import similarity_index, statements
from contreact.text.similarity import INDEX_BANDS


def test_every_statement_made_compiles_for_both_backends() -> None:
    assert statements.compile_all() >= 15
    for made in list(statements._MADE):
        assert set(made._compiled) == set(statements.DIALECTS)


def test_the_similarity_look_up_is_made_when_the_engine_is_imported() -> None:
    assert INDEX_BANDS in similarity_index._LOOKUPS  # made by the import, not by a first check
    look_up = similarity_index.lookup(INDEX_BANDS)
    statements.compile_all()
    assert set(look_up._compiled) == {"sqlite", "postgresql"}
