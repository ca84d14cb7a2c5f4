"""contreact's own tables, made and changed by Alembic revisions (`versions/`), never by hand.

`checkpoints.migrate` runs them: a new database gets every revision, one made by an older
contreact the revisions it lacks, each process at most once and one process at a time. The
version is kept in `VERSION_TABLE`, a name of contreact's own, so a database shared with
another application's Alembic keeps both. LangGraph's checkpoint tables are LangGraph's
(its savers' `setup` migrates them); the study queue's are procrastinate's.

A change to `checkpoints.schema` comes with a new revision in `versions/`: its `upgrade`
changes a database of the previous revision into one of the new schema (keeping every row),
`down_revision` names the previous one, and `HEAD` here becomes its id.
`tests/unit/test_migrations.py` checks that the revisions make exactly the declared schema
on both backends, and that `HEAD` is the newest.
"""

VERSION_TABLE = "contreact_alembic_version"
"""Where a database records the revision it was brought to."""

BASELINE = "0001"
"""The schema of the last release before migrations: a database made before them is adopted
at it (see `versions/r0001_baseline.py`)."""

HEAD = "0004"
"""The newest revision: a database that records it is up to date (one query, no Alembic)."""

TABLE_PREFIX = "contreact_"
"""Every table of contreact's own starts with it; the database may hold others'."""

SCRIPT_LOCATION = "contreact.checkpoints:migrations"
"""This package, as Alembic's `script_location` (a package resource: works installed)."""


def ours(name: str | None, kind: str, _parents: object) -> bool:
    """Alembic's `include_name`: autogenerate compares contreact's tables only."""
    return kind != "table" or (name or "").startswith(TABLE_PREFIX)
