"""Fencing: a run handed out by a study's queue is written by the newest lease holder only.

A queue delivers a run at least once, and a worker that froze (SIGSTOP, a paused VM, a cut
network) past its lease has its run taken over by another worker. When it wakes it must
write nothing more to that run, not even one checkpoint, or the run's history forks
silently. Checking "do I still hold the lease?" before a write leaves a gap between the
check and the write; the check therefore runs inside the write itself.

Each lease has a token from a PostgreSQL sequence (unique across runs). The worker hands
the token to the process that drives the run through libpq's `PGOPTIONS`, so every
connection that process opens (SQLAlchemy's pool, the checkpoint saver's own) carries it
as the setting `contreact.fence`. A trigger on every table a run writes (the checkpoint
tables, the journal, events, memory, cycles, lineages, similarity keys, and updates of the
registry row) compares it with the run's lease under `FOR SHARE`: a write by an older
token fails with SQLSTATE `CR001`, and taking a lease waits for any write in flight under
the old one to end. Connections without the setting (the CLI, Studio, SQLite) are not
fenced: only the queue hands out leases.

A lock left by a frozen writer in the middle of a transaction would block the takeover;
`idle_in_transaction_session_timeout` on the fenced connections bounds that wait.
"""

from __future__ import annotations

import hashlib
import os
import socket
import time
from collections.abc import Iterator

from sqlalchemy import Engine, text, update
from sqlalchemy.dialects.postgresql import insert as pg_insert

from contreact.checkpoints.schema import leases

LEASE_LOST_SQLSTATE = "CR001"
"""What a write by a lease that passed to another worker fails with."""

IDLE_IN_TRANSACTION_MS = 30_000
"""How long a fenced connection may sit in an open transaction: a frozen driver's locks
are released after this, so the worker taking its run over does not wait for it."""

RUN_TABLES = (
    "contreact_events",
    "contreact_journal",
    "contreact_memories",
    "contreact_lineages",
    "contreact_cycles",
    "contreact_similarity_keys",
)
"""Tables whose rows name their run in `run_id` (a branch's scope is `RUN@LINEAGE`)."""

THREAD_TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")
"""LangGraph's checkpoint tables: rows name the run's thread."""

_FUNCTION = f"""
CREATE OR REPLACE FUNCTION contreact_fence() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    mine text := current_setting('contreact.fence', true);
    subject jsonb;
    owner text;
    held bigint;
BEGIN
    IF mine IS NULL OR mine = '' THEN
        RETURN COALESCE(NEW, OLD);
    END IF;
    subject := to_jsonb(COALESCE(NEW, OLD));
    IF TG_ARGV[0] = 'thread_id' THEN
        SELECT run_id INTO owner FROM contreact_runs WHERE thread_id = subject->>'thread_id';
    ELSE
        owner := split_part(subject->>'run_id', '@', 1);
    END IF;
    IF owner IS NULL THEN
        RETURN COALESCE(NEW, OLD);
    END IF;
    SELECT token INTO held FROM contreact_leases WHERE run_id = owner FOR SHARE;
    IF held IS NOT NULL AND held <> mine::bigint THEN
        RAISE EXCEPTION USING
            ERRCODE = '{LEASE_LOST_SQLSTATE}',
            MESSAGE = format(
                'the lease of run %s passed to another worker (lease %s; this process held %s)',
                owner, held, mine
            );
    END IF;
    RETURN COALESCE(NEW, OLD);
END $$;
"""


def _trigger(table: str, column: str, events: str) -> str:
    return (
        f"CREATE OR REPLACE TRIGGER contreact_fence BEFORE {events} ON {table} "
        f"FOR EACH ROW EXECUTE FUNCTION contreact_fence('{column}')"
    )


def install_fences(engine: Engine) -> None:
    """Put the fence on every table a run writes (PostgreSQL; idempotent).

    The checkpoint tables are LangGraph's: call this after its saver's `setup()`.
    """
    if engine.dialect.name != "postgresql":
        return
    statements = [_FUNCTION]
    statements += [_trigger(t, "run_id", "INSERT OR UPDATE OR DELETE") for t in RUN_TABLES]
    statements += [_trigger(t, "thread_id", "INSERT OR UPDATE OR DELETE") for t in THREAD_TABLES]
    statements.append(_trigger("contreact_runs", "run_id", "UPDATE"))
    made = hashlib.sha256("\n".join(statements).encode()).hexdigest()
    with engine.begin() as conn:
        # Replacing a trigger locks its table against writes and waits for every open
        # transaction on it: a frozen machine's would hold a new worker's start for good.
        # The fences a database already has, exactly these, are left alone.
        if conn.execute(text(_MADE)).scalar() == made:
            return
        # Two workers starting at once would race on CREATE OR REPLACE.
        conn.execute(text("SELECT pg_advisory_xact_lock(hashtext('contreact_fence'))"))
        conn.execute(text("CREATE SEQUENCE IF NOT EXISTS contreact_lease_tokens"))
        for statement in statements:
            conn.execute(text(statement))
        conn.execute(text(f"COMMENT ON FUNCTION contreact_fence() IS '{made}'"))


_MADE = """
SELECT obj_description(p.oid, 'pg_proc') FROM pg_proc p
WHERE p.proname = 'contreact_fence' AND p.pronargs = 0
"""
"""The fingerprint of the fences as they were last put on (a comment on their function)."""


def worker_name() -> str:
    """This process as a lease holder: `machine:pid`."""
    return f"{socket.gethostname()}:{os.getpid()}"


def take_lease(engine: Engine, run_id: str, *, host: str, job_id: int | None = None) -> int:
    """Take run `run_id`'s lease for this process; returns its token.

    Any earlier token is refused from now on. A write under the old token that is in
    flight holds the lease row (`FOR SHARE` in the fence), so this waits for it to end:
    after this returns, nothing more of the old holder's can commit.
    """
    with engine.begin() as conn:
        token = int(conn.execute(text("SELECT nextval('contreact_lease_tokens')")).scalar_one())
        row = {
            "run_id": run_id,
            "token": token,
            "worker": worker_name(),
            "host": host,
            "job_id": job_id,
            "taken_at": time.time(),
            "released": False,
        }
        changed = {k: v for k, v in row.items() if k != "run_id"}
        conn.execute(
            pg_insert(leases)
            .values(**row)
            .on_conflict_do_update(index_elements=["run_id"], set_=changed)
        )
    return token


def release_lease(engine: Engine, run_id: str, token: int) -> bool:
    """Release the lease if `token` still holds it; whether it did (the token stays refused).

    False: the lease passed to another worker meanwhile.
    """
    with engine.begin() as conn:
        released = conn.execute(
            update(leases)
            .where(leases.c.run_id == run_id, leases.c.token == token)
            .values(released=True)
        )
    return released.rowcount == 1


def fenced_env(token: int) -> dict[str, str]:
    """The environment that makes a driving process's every connection carry `token`."""
    options = os.environ.get("PGOPTIONS", "")
    fence = (
        f"-c contreact.fence={token} "
        f"-c idle_in_transaction_session_timeout={IDLE_IN_TRANSACTION_MS}"
    )
    return {"PGOPTIONS": f"{options} {fence}".strip()}


def _chain(exc: BaseException | None) -> Iterator[BaseException]:
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        orig = getattr(exc, "orig", None)
        if isinstance(orig, BaseException):
            yield orig
        exc = exc.__cause__ or exc.__context__


def lease_lost(exc: BaseException) -> str | None:
    """What the database said, if `exc` (or what caused it) is a write refused by the fence."""
    for link in _chain(exc):
        if getattr(link, "sqlstate", None) == LEASE_LOST_SQLSTATE:
            diag = getattr(link, "diag", None)
            said = getattr(diag, "message_primary", None) or str(link).splitlines()[0]
            return str(said)
    return None
