"""The baseline: contreact's tables as the last release before migrations made them.

On a new database this creates them. A database made before migrations has no version
table: Alembic takes it for an empty one and runs this revision, which creates only what
the database lacks. A database of that last release lacks nothing, so nothing changes and
the revision is only recorded (it is stamped at the baseline); one made by an earlier
release gets the tables, columns and indexes added since (each such column is nullable or
has a default, so its rows stay as they were) and loses the index the later one replaced.

The tables are written out here as they were then, not imported: later revisions change
`checkpoints.schema`, and this one must keep making what it made.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision: str | None = None
branch_labels = None
depends_on = None

REPLACED_INDEXES = {"contreact_events": ("ix_contreact_events_run_id",)}
"""Indexes an earlier release made that a later one covers (dropped: each costs bytes per row)."""


def baseline_tables() -> sa.MetaData:
    """The baseline's tables."""
    m = sa.MetaData()
    sa.Table(
        "contreact_runs",
        m,
        sa.Column("run_id", sa.String(200), primary_key=True),
        sa.Column("thread_id", sa.String(64), nullable=False, unique=True),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("model", sa.String(200), nullable=False),
        sa.Column("host", sa.String(500), nullable=False),
        sa.Column("config", sa.Text, nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("parent_run_id", sa.String(200), nullable=True),
        sa.Column("fork_cycle", sa.Integer, nullable=True),
        sa.Column("batch", sa.String(200), nullable=True, index=True),
        sa.Column("pid", sa.Integer, nullable=True),
        sa.Column("origin", sa.String(20), nullable=False, server_default="cli"),
        sa.Column("heartbeat", sa.Float, nullable=True),
        sa.Column("driver_host", sa.String(255), nullable=True),
        sa.Column("created_at", sa.String(40), nullable=False),
        sa.Column("updated_at", sa.String(40), nullable=False),
    )
    sa.Table(
        "contreact_events",
        m,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.String(200), nullable=False),
        sa.Column("key", sa.String(200), nullable=False),
        sa.Column("cycle", sa.Integer, nullable=False),
        sa.Column("event_type", sa.String(40), nullable=False),
        sa.Column("timestamp", sa.String(40), nullable=False),
        sa.Column("payload", sa.Text, nullable=False),
        sa.UniqueConstraint("run_id", "key", name="uq_contreact_events_run_key"),
        sa.Index("ix_contreact_events_run_cycle", "run_id", "cycle"),
    )
    sa.Table(
        "contreact_journal",
        m,
        sa.Column("run_id", sa.String(200), primary_key=True),
        sa.Column("key", sa.String(200), primary_key=True),
        sa.Column("cycle", sa.Integer, nullable=False),
        sa.Column("result", sa.Text, nullable=False),
        sa.Index("ix_contreact_journal_run_cycle", "run_id", "cycle"),
    )
    sa.Table(
        "contreact_memories",
        m,
        sa.Column("run_id", sa.String(200), primary_key=True),
        sa.Column("key", sa.Text, primary_key=True),
        sa.Column("value", sa.Text, nullable=False),
    )
    sa.Table(
        "contreact_lineages",
        m,
        sa.Column("scope", sa.String(300), primary_key=True),
        sa.Column("run_id", sa.String(200), nullable=False, index=True),
        sa.Column("parent_scope", sa.String(300), nullable=False),
        sa.Column("thread_id", sa.String(64), nullable=False),
        sa.Column("checkpoint_id", sa.String(64), nullable=False),
        sa.Column("cycle", sa.Integer, nullable=False),
        sa.Column("steps", sa.Integer, nullable=False),
        sa.Column("steps_done", sa.Integer, nullable=False),
        sa.Column("created_at", sa.String(40), nullable=False),
    )
    sa.Table(
        "contreact_cycles",
        m,
        sa.Column("run_id", sa.String(200), primary_key=True),
        sa.Column("cycle", sa.Integer, primary_key=True),
        sa.Column("opening", sa.Text, nullable=False, server_default=""),
        sa.Column("reflection", sa.Text, nullable=False),
        sa.Column("metrics", sa.Text, nullable=False),
        sa.Column("flags", sa.Text, nullable=False),
        sa.Column("similarity", sa.Float, nullable=True),
        sa.Column("advisory", sa.Text, nullable=True),
    )
    sa.Table(
        "contreact_similarity_keys",
        m,
        sa.Column("run_id", sa.String(200), primary_key=True),
        sa.Column("key", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("cycle", sa.Integer, primary_key=True, autoincrement=False),
        sqlite_with_rowid=False,
    )
    sa.Table(
        "contreact_pei",
        m,
        sa.Column("run_id", sa.String(200), primary_key=True),
        sa.Column("evaluator", sa.String(200), primary_key=True),
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
    sa.Table(
        "contreact_batch_runs",
        m,
        sa.Column("batch", sa.String(200), primary_key=True),
        sa.Column("run_id", sa.String(200), primary_key=True),
        sa.Column("position", sa.Integer, nullable=False),
        sa.Column("model", sa.String(200), nullable=False),
        sa.Column("cycles", sa.Integer, nullable=False),
    )
    sa.Table(
        "contreact_leases",
        m,
        sa.Column("run_id", sa.String(200), primary_key=True),
        sa.Column("token", sa.BigInteger, nullable=False),
        sa.Column("worker", sa.String(300), nullable=False),
        sa.Column("host", sa.String(500), nullable=False),
        sa.Column("job_id", sa.BigInteger, nullable=True),
        sa.Column("taken_at", sa.Float, nullable=False),
        sa.Column("released", sa.Boolean, nullable=False),
    )
    sa.Table("contreact_schema", m, sa.Column("fingerprint", sa.String(64), primary_key=True))
    return m


def _added(column: sa.Column[object]) -> sa.Column[object]:
    """`column` as it can be added to a table that has rows."""
    default = getattr(column.server_default, "arg", None)
    if default is None and not column.nullable:
        default = ""
    return sa.Column(column.name, column.type, nullable=column.nullable, server_default=default)


def upgrade() -> None:
    """Create what the database lacks of the baseline (see the module doc)."""
    bind = op.get_bind()
    inspector = sa.inspect(bind)
    present = set(inspector.get_table_names())
    for table in baseline_tables().sorted_tables:
        if table.name not in present:
            table.create(bind)
            continue
        columns = {c["name"] for c in inspector.get_columns(table.name)}
        for column in table.columns:
            if column.name not in columns:
                op.add_column(table.name, _added(column))
        indexes = {i["name"] for i in inspector.get_indexes(table.name)}
        for index in table.indexes:
            if index.name not in indexes:
                index.create(bind)
        for name in REPLACED_INDEXES.get(table.name, ()):
            if name in indexes:
                op.drop_index(name, table_name=table.name)


def downgrade() -> None:
    """Not offered: below the baseline there is no contreact schema to go back to."""
    raise NotImplementedError("the baseline is the oldest revision; there is nothing below it")
