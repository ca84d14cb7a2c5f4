"""The tool a run's driver is inside, and since when: `status` says how long it has run.

Two nullable columns of `contreact_runs`, written by the driving process's heartbeat
(`checkpoints.activity`); a run's row stays as it was (NULL: not inside a tool).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add the two columns."""
    op.add_column("contreact_runs", sa.Column("in_tool", sa.String(200), nullable=True))
    op.add_column("contreact_runs", sa.Column("in_tool_since", sa.Float, nullable=True))


def downgrade() -> None:
    """Drop them (SQLite copies the table to drop a column: Alembic's batch mode)."""
    with op.batch_alter_table("contreact_runs") as table:
        table.drop_column("in_tool_since")
        table.drop_column("in_tool")
