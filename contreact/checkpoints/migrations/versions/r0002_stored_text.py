"""Any text stored as it was: escaped on PostgreSQL; the schema fingerprint table dropped.

From this revision on, a text that PostgreSQL cannot store (NUL) is stored escaped, and a
stored text that starts with the escape's marker is an escaped one
(`checkpoints.stored_text`). A value written before that happened to start with the marker
is escaped here, so that it reads back as it was written. SQLite stores every text as it
is and needs nothing.

The `contreact_schema` table held the fingerprint of the tables an older contreact brought
the database up to; Alembic's version table says that now.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

MARK = "\ufdd0"
"""The escape's marker (`checkpoints.stored_text.MARK` when this revision was written)."""

FREE_TEXT = {
    "contreact_runs": ("model", "host", "reason", "batch", "driver_host"),
    "contreact_memories": ("key", "value"),
    "contreact_cycles": ("opening", "reflection", "advisory"),
    "contreact_pei": ("evaluator", "reason", "answer"),
    "contreact_batch_runs": ("batch", "model"),
    "contreact_leases": ("worker", "host"),
}
"""The columns that hold text from outside (a model, a config, a host): the rest hold JSON
(which starts with `{`, `[` or `"`) or names and times contreact makes."""


def upgrade() -> None:
    """Drop the fingerprint table; on PostgreSQL, escape stored text that starts like escaped."""
    op.drop_table("contreact_schema")
    if op.get_bind().dialect.name != "postgresql":
        return
    for table, columns in FREE_TEXT.items():
        for column in columns:
            op.execute(
                sa.text(
                    f"UPDATE {table} SET {column} = :mark || replace({column}, '%', '%25') "
                    f"WHERE left({column}, 1) = :mark"
                ).bindparams(mark=MARK)
            )


def downgrade() -> None:
    """The fingerprint table back (empty: the older contreact checks its tables and marks it).

    Escaped text stays escaped: the older contreact could not store it as it was anyway.
    """
    op.create_table("contreact_schema", sa.Column("fingerprint", sa.String(64), primary_key=True))
