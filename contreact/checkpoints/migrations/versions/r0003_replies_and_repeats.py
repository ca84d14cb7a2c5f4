"""The operator's replies, one per message, and PEI questions asked again.

`contreact_operator_replies` holds a reply to an agent's message before any run goes on, so
that one reply wins when two faces answer at once (`engine.replies`); `contreact_pei_repeats`
holds repeat 2, 3, ... of a PEI rating (`pei --repeat K`). Both are new: nothing to migrate.
The tables are written out as they were made here, not imported (`r0001_baseline` says why).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create the two tables."""
    op.create_table(
        "contreact_operator_replies",
        sa.Column("run_id", sa.String(200), primary_key=True),
        sa.Column("ask", sa.String(64), primary_key=True),
        sa.Column("reply", sa.Text, nullable=False),
        sa.Column("created_at", sa.String(40), nullable=False),
    )
    op.create_table(
        "contreact_pei_repeats",
        sa.Column("run_id", sa.String(200), primary_key=True),
        sa.Column("evaluator", sa.String(200), primary_key=True),
        sa.Column("repeat", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("fork_run_id", sa.String(200), nullable=False),
        sa.Column("at_cycle", sa.Integer, nullable=False),
        sa.Column("level", sa.Integer, nullable=True),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("answer", sa.Text, nullable=False),
        sa.Column("instrument_sha", sa.String(64), nullable=False),
        sa.Column("created_at", sa.String(40), nullable=False),
        sa.Column("omitted", sa.Text, nullable=True),
        sa.Column("manual", sa.Boolean, nullable=False, server_default="0"),
        sa.Column("options", sa.Text, nullable=True),
    )


def downgrade() -> None:
    """Drop them."""
    op.drop_table("contreact_pei_repeats")
    op.drop_table("contreact_operator_replies")
