"""The tables contreact keeps beside the checkpoints.

Checkpoints, memory, the run registry, the event log and the side-effect journal live in
one database (a SQLite file in the data directory, or PostgreSQL by URL) so that a side
effect and its record can commit in one transaction: that is what makes crash + resume
exactly-once. The tables are declared here once for both backends; the Alembic revisions
in `checkpoints/migrations` make and change them (`checkpoints.migrate`), and a change here
comes with a revision there. Every text column stores any text (`checkpoints.stored_text`).
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Float,
    Index,
    Integer,
    MetaData,
    Table,
    UniqueConstraint,
)

from contreact.checkpoints.stored_text import StoredString, StoredText

metadata = MetaData()

runs = Table(
    "contreact_runs",
    metadata,
    Column("run_id", StoredString(200), primary_key=True),
    Column("thread_id", StoredString(64), nullable=False, unique=True),
    Column("status", StoredString(20), nullable=False),
    Column("model", StoredString(200), nullable=False),
    Column("host", StoredString(500), nullable=False, default=""),
    Column("config", StoredText, nullable=False),
    Column("reason", StoredText, nullable=False, default=""),
    Column("parent_run_id", StoredString(200), nullable=True),
    Column("fork_cycle", Integer, nullable=True),
    Column("batch", StoredString(200), nullable=True, index=True),
    Column("pid", Integer, nullable=True),
    Column("origin", StoredString(20), nullable=False, default="cli", server_default="cli"),
    # Epoch seconds, refreshed every second while a process drives the run: a run whose
    # heartbeat stopped is interrupted, whatever machine or container drove it.
    Column("heartbeat", Float, nullable=True),
    Column("driver_host", StoredString(255), nullable=True),
    # The tool of the run's own its driver is inside, and since when (epoch seconds),
    # carried by the heartbeat (`checkpoints.activity`); NULL outside a tool.
    Column("in_tool", StoredString(200), nullable=True),
    Column("in_tool_since", Float, nullable=True),
    Column("created_at", StoredString(40), nullable=False),
    Column("updated_at", StoredString(40), nullable=False),
)

events = Table(
    "contreact_events",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", StoredString(200), nullable=False),
    Column("key", StoredString(200), nullable=False),
    Column("cycle", Integer, nullable=False),
    Column("event_type", StoredString(40), nullable=False),
    Column("timestamp", StoredString(40), nullable=False),
    Column("payload", StoredText, nullable=False),
    UniqueConstraint("run_id", "key", name="uq_contreact_events_run_key"),
    # A run's events by cycle (a cycle's errors, a report's window, a fork point): read
    # through the index, not by scanning every event of the run. It serves run-only
    # look-ups too, so the run_id index of older databases is dropped.
    Index("ix_contreact_events_run_cycle", "run_id", "cycle"),
)

journal = Table(
    "contreact_journal",
    metadata,
    Column("run_id", StoredString(200), primary_key=True),
    Column("key", StoredString(200), primary_key=True),
    Column("cycle", Integer, nullable=False),
    Column("result", StoredText, nullable=False),
    # A ledger loads only its scope's latest cycles (`journal._Recorded`): a seek, not a
    # scan of every record of the run.
    Index("ix_contreact_journal_run_cycle", "run_id", "cycle"),
)

memories = Table(
    "contreact_memories",
    metadata,
    Column("run_id", StoredString(200), primary_key=True),
    Column("key", StoredText, primary_key=True),
    Column("value", StoredText, nullable=False),
)

lineages = Table(
    "contreact_lineages",
    metadata,
    Column("scope", StoredString(300), primary_key=True),
    Column("run_id", StoredString(200), nullable=False, index=True),
    Column("parent_scope", StoredString(300), nullable=False),
    Column("thread_id", StoredString(64), nullable=False),
    Column("checkpoint_id", StoredString(64), nullable=False),
    Column("cycle", Integer, nullable=False),
    Column("steps", Integer, nullable=False),
    Column("steps_done", Integer, nullable=False),
    Column("created_at", StoredString(40), nullable=False),
)
"""Branches of runs: each scope (see `checkpoints.lineage`) and where it left its parent."""

cycles = Table(
    "contreact_cycles",
    metadata,
    Column("run_id", StoredString(200), primary_key=True),
    Column("cycle", Integer, primary_key=True),
    Column("opening", StoredText, nullable=False, default="", server_default=""),
    Column("reflection", StoredText, nullable=False),
    Column("metrics", StoredText, nullable=False),
    Column("flags", StoredText, nullable=False),
    Column("similarity", Float, nullable=True),
    Column("advisory", StoredText, nullable=True),
)

similarity_keys = Table(
    "contreact_similarity_keys",
    metadata,
    Column("run_id", StoredString(200), primary_key=True),
    Column("key", BigInteger, primary_key=True, autoincrement=False),
    Column("cycle", Integer, primary_key=True, autoincrement=False),
    sqlite_with_rowid=False,
)
"""The similarity monitor's index: each reflection's locality-sensitive hash keys
(`text.similarity.index_keys`), so the reflections that resemble a new one are found by
key, not by comparing it with every earlier one (see `checkpoints.similarity_index`)."""

pei = Table(
    "contreact_pei",
    metadata,
    Column("run_id", StoredString(200), primary_key=True),
    Column("evaluator", StoredString(200), primary_key=True),
    Column("fork_run_id", StoredString(200), nullable=False),
    Column("at_cycle", Integer, nullable=False),
    Column("level", Integer, nullable=True),
    Column("reason", StoredText, nullable=False, default=""),
    Column("answer", StoredText, nullable=False),
    Column("instrument_sha", StoredString(64), nullable=False),
    Column("created_at", StoredString(40), nullable=False),
    Column("omitted", StoredText, nullable=True),
    Column("manual", Boolean, nullable=False, server_default="0"),
    Column("options", StoredText, nullable=True),
)
"""One PEI rating per (rated run, evaluator model); `level` is None when none was parsed.

`omitted` (JSON) says what of the history did not fit the evaluator's context; `manual`
marks a level set by hand; `options` (JSON) are the Ollama options the question was sent
with (None: rated before they were recorded, or set by hand)."""

pei_repeats = Table(
    "contreact_pei_repeats",
    metadata,
    Column("run_id", StoredString(200), primary_key=True),
    Column("evaluator", StoredString(200), primary_key=True),
    Column("repeat", Integer, primary_key=True, autoincrement=False),
    Column("fork_run_id", StoredString(200), nullable=False),
    Column("at_cycle", Integer, nullable=False),
    Column("level", Integer, nullable=True),
    Column("reason", StoredText, nullable=False, default=""),
    Column("answer", StoredText, nullable=False),
    Column("instrument_sha", StoredString(64), nullable=False),
    Column("created_at", StoredString(40), nullable=False),
    Column("omitted", StoredText, nullable=True),
    Column("manual", Boolean, nullable=False, server_default="0"),
    Column("options", StoredText, nullable=True),
)
"""The same question asked again (`pei --repeat K`): repeat 2, 3, ... of a rating, each with
its own seed in `options`; repeat 1 is the rating in `contreact_pei`."""


batch_runs = Table(
    "contreact_batch_runs",
    metadata,
    Column("batch", StoredString(200), primary_key=True),
    Column("run_id", StoredString(200), primary_key=True),
    Column("position", Integer, nullable=False),
    Column("model", StoredString(200), nullable=False),
    Column("cycles", Integer, nullable=False),
)
"""The runs a batch plans, in its order, written before any starts: a batch's status lists
the runs that have not started too, from any machine that sees the storage."""


leases = Table(
    "contreact_leases",
    metadata,
    Column("run_id", StoredString(200), primary_key=True),
    Column("token", BigInteger, nullable=False),
    Column("worker", StoredString(300), nullable=False, default=""),
    Column("host", StoredString(500), nullable=False, default=""),
    Column("job_id", BigInteger, nullable=True),
    Column("taken_at", Float, nullable=False),
    Column("released", Boolean, nullable=False, default=False),
)
"""Who may write a run that a study's queue hands out: the worker holding its newest lease.

A worker takes a run's lease (a new token from a sequence) before it drives the run; the
token goes with every connection its driving process opens, and the database refuses a
write by any other token (`checkpoints.fencing`). The row stays when the lease is released,
so an older token stays refused."""


operator_replies = Table(
    "contreact_operator_replies",
    metadata,
    Column("run_id", StoredString(200), primary_key=True),
    Column("ask", StoredString(64), primary_key=True),
    Column("reply", StoredText, nullable=False),
    Column("created_at", StoredString(40), nullable=False),
)
"""The operator's answers to agents' messages, one per message at most: `ask` is the saved
checkpoint the run waits on for it. The key lets one reply win when two are sent at once;
the run's next drive, in any process, answers the agent with it (`engine.replies`)."""
