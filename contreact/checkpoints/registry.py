"""The run registry: human run ids, their LangGraph thread UUIDs, status, model and config.

Studio and LangGraph address a run by a thread UUID; researchers address it by a name.
The registry is the one place that maps one to the other and says whether a run is
running, paused for the operator, completed or failed (and why).
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from typing import Any

from sqlalchemy import Engine, select, update
from sqlalchemy.exc import IntegrityError

from contreact.checkpoints.activity import tool_of
from contreact.checkpoints.event_schema import utc_now

# Re-exported: the registry's vocabulary, defined where the fast read can use it.
from contreact.checkpoints.run_record import HEARTBEAT_S as HEARTBEAT_S
from contreact.checkpoints.run_record import RUN_ID_PATTERN as RUN_ID_PATTERN
from contreact.checkpoints.run_record import STALE_AFTER_S as STALE_AFTER_S
from contreact.checkpoints.run_record import RunExistsError as RunExistsError
from contreact.checkpoints.run_record import RunNotFoundError as RunNotFoundError
from contreact.checkpoints.run_record import RunRecord as RunRecord
from contreact.checkpoints.run_record import RunStatus as RunStatus
from contreact.checkpoints.run_record import ShownStatus as ShownStatus
from contreact.checkpoints.run_record import check_run_id as check_run_id
from contreact.checkpoints.run_record import record_from_row
from contreact.checkpoints.schema import runs
from contreact.checkpoints.statements import Prepared, named
from contreact.checkpoints.transactions import Tx


def _record(row: Any) -> RunRecord:
    return record_from_row(dict(row))


def create_run(
    engine: Engine,
    run_id: str,
    *,
    model: str,
    host: str,
    config: dict[str, Any],
    thread_id: str | None = None,
    parent_run_id: str | None = None,
    fork_cycle: int | None = None,
    batch: str | None = None,
    origin: str = "cli",
) -> RunRecord:
    """Register a new run; raises `RunExistsError` if the id is taken."""
    check_run_id(run_id)
    now = utc_now()
    row = {
        "run_id": run_id,
        "thread_id": thread_id or str(uuid.uuid4()),
        "status": "running",
        "model": model,
        "host": host,
        "config": json.dumps(config, ensure_ascii=False, default=str),
        "reason": "",
        "parent_run_id": parent_run_id,
        "fork_cycle": fork_cycle,
        "batch": batch,
        "pid": os.getpid(),
        "origin": origin,
        "created_at": now,
        "updated_at": now,
    }
    try:
        with engine.begin() as conn:
            conn.execute(runs.insert().values(**row))
    except IntegrityError as exc:
        raise RunExistsError(run_id) from exc
    return get_run(engine, run_id)


def get_run(engine: Engine, run_id: str) -> RunRecord:
    """The registry row of `run_id`; raises `RunNotFoundError`."""
    with engine.connect() as conn:
        row = conn.execute(select(runs).where(runs.c.run_id == run_id)).mappings().first()
    if row is None:
        raise RunNotFoundError(run_id)
    return _record(row)


def find_by_thread(engine: Engine, thread_id: str) -> RunRecord | None:
    """The run whose LangGraph thread is `thread_id`, if registered."""
    with engine.connect() as conn:
        row = conn.execute(select(runs).where(runs.c.thread_id == thread_id)).mappings().first()
    return None if row is None else _record(row)


def find_run_thread(engine: Engine, run_id: str) -> str | None:
    """The thread id registered for `run_id`, if the run is registered."""
    with engine.connect() as conn:
        found = conn.execute(select(runs.c.thread_id).where(runs.c.run_id == run_id)).scalar()
    return None if found is None else str(found)


def list_runs(engine: Engine) -> list[RunRecord]:
    """All runs, oldest first."""
    with engine.connect() as conn:
        rows = conn.execute(select(runs).order_by(runs.c.created_at, runs.c.run_id)).mappings()
        return [_record(r) for r in rows]


_STUDIO_DONE_PARAMS = named(runs, "run_id", "origin", "status", "reason", "updated_at")
_STUDIO_DONE = Prepared(
    lambda _: (
        update(runs)
        .where(
            runs.c.run_id == _STUDIO_DONE_PARAMS["run_id"],
            runs.c.origin == _STUDIO_DONE_PARAMS["origin"],
        )
        .values(
            status=_STUDIO_DONE_PARAMS["status"],
            reason=_STUDIO_DONE_PARAMS["reason"],
            updated_at=_STUDIO_DONE_PARAMS["updated_at"],
        )
    )
)


def complete_studio_run(conn: Tx, run_id: str) -> None:
    """Mark a run started in Studio completed (the CLI's runner records its own runs)."""
    _STUDIO_DONE.execute(
        conn,
        {
            "run_id": run_id,
            "origin": "studio",
            "status": "completed",
            "reason": "",
            "updated_at": utc_now(),
        },
    )


def beat(engine: Engine, run_id: str) -> None:
    """Refresh the run's heartbeat (its driver is alive), and say which tool it is in."""
    tool, since = tool_of(run_id)
    with engine.begin() as conn:
        conn.execute(
            update(runs)
            .where(runs.c.run_id == run_id)
            .values(
                heartbeat=time.time(),
                driver_host=socket.gethostname(),
                in_tool=tool,
                in_tool_since=since,
            )
        )


class Heartbeat:
    """A daemon thread that beats for a run while its process drives it.

    Each beat also says which tool of its own the run is inside, if any (`activity`), so
    `status` can tell a slow tool from a hung run at no cost of its own. One tiny UPDATE a
    second; a failed beat (a locked SQLite file under many writers) is
    skipped, not fatal: the next one a second later counts.
    """

    def __init__(self, engine: Engine, run_id: str, every_s: float = HEARTBEAT_S) -> None:
        self.engine, self.run_id, self.every_s = engine, run_id, every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"heartbeat-{run_id}", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                beat(self.engine, self.run_id)
            except Exception:  # noqa: BLE001, S110 - a missed beat is harmless, see above
                pass

    def __enter__(self) -> Heartbeat:
        beat(self.engine, self.run_id)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        try:
            with self.engine.begin() as conn:
                conn.execute(
                    update(runs)
                    .where(runs.c.run_id == self.run_id)
                    .values(heartbeat=None, in_tool=None, in_tool_since=None)
                )
        except Exception:  # noqa: BLE001, S110 - the status written after this says the rest
            pass


def set_status(
    engine: Engine,
    run_id: str,
    status: RunStatus,
    *,
    reason: str = "",
    claim: bool = False,
    **fields: Any,
) -> None:
    """Record a run's status (and why); `claim` marks this process as the run's driver."""
    values: dict[str, Any] = {"status": status, "reason": reason, "updated_at": utc_now()}
    if claim:
        values["pid"] = os.getpid()
    if "config" in fields:
        fields["config"] = json.dumps(fields["config"], ensure_ascii=False, default=str)
    values.update(fields)
    with engine.begin() as conn:
        conn.execute(update(runs).where(runs.c.run_id == run_id).values(**values))


def record_plan(engine: Engine, batch: str, planned: list[tuple[str, str, int]]) -> None:
    """Store batch `batch`'s runs (run id, model, cycles) in order.

    A run added to the plan (another replicate) is stored; a stored run takes its place
    in the new order and its cycles (a batch whose cycles were raised). Two machines
    starting the same batch at once both try: the one that loses the race finds the plan
    stored, which is all it wanted.
    """
    from contreact.checkpoints.schema import batch_runs

    try:
        with engine.begin() as conn:
            stored = {
                r: (p, c)
                for r, p, c in conn.execute(
                    select(batch_runs.c.run_id, batch_runs.c.position, batch_runs.c.cycles).where(
                        batch_runs.c.batch == batch
                    )
                ).all()
            }
            rows = [
                {"batch": batch, "run_id": r, "position": i, "model": m, "cycles": c}
                for i, (r, m, c) in enumerate(planned)
                if r not in stored
            ]
            if rows:
                conn.execute(batch_runs.insert(), rows)
            for i, (r, _, c) in enumerate(planned):
                if r in stored and stored[r] != (i, c):
                    conn.execute(
                        update(batch_runs)
                        .where(batch_runs.c.batch == batch, batch_runs.c.run_id == r)
                        .values(position=i, cycles=c)
                    )
    except IntegrityError:
        pass  # stored by another process between the read and the insert
