"""The checkpointer LangGraph Studio (`langgraph dev`) uses: the CLI's own storage, opened async.

`langgraph.json` points here (`checkpointer.path`). The dev server refuses a graph that
brings its own checkpointer, so it gets ours through this factory, over the very database
the CLI writes (`CONTREACT_HOME` / `CONTREACT_DB_URL`, resolved exactly as the CLI resolves
them). The server only calls the async saver methods, which the CLI's sync savers
(`checkpoints.saver`) do not implement, hence AsyncSqliteSaver / AsyncPostgresSaver here;
both read and write the same tables in the same format.

Two things a bare saver would get wrong:

* The dev server only shows threads it created itself; a run started by the CLI exists
  only in our database, so `GET /threads/{id}/state` answers 404 and Studio lists nothing.
  While the server runs, `publish_runs` registers every run of the registry as a thread
  of the `contreact` graph (under its thread UUID, see `contreact status RUN --json`).
  The server computes a thread's status (`idle`, `busy`, `interrupted`, `error`) only from
  runs it drove itself, so it would list a CLI run paused for the operator, or killed, as
  `idle`; `publish_runs` also keeps the status of each published thread in step with the
  registry (see `THREAD_STATUS`); a Studio run that fails in the server is marked failed in
  the registry.
* Deleting such a thread in Studio would delete the run's checkpoints behind the CLI's
  back (its registry, events and memory would stay, and `resume` would start over). The
  savers here refuse to delete the checkpoints of a registered run.

Everything that touches files or the sync SQLAlchemy engine runs in a worker thread: the
dev server watches its event loop for blocking calls (blockbuster).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from sqlalchemy import Engine

from contreact.checkpoints.engines import engine_for
from contreact.checkpoints.registry import (
    RunRecord,
    ShownStatus,
    find_by_thread,
    list_runs,
    set_status,
)
from contreact.checkpoints.saver import ShortVersions, serializer, store_any_text
from contreact.checkpoints.sqlite_file import busy_timeout_ms, sqlite_pragmas
from contreact.checkpoints.storage import Storage, resolve_storage

log = logging.getLogger("contreact.studio")

STUDIO_GRAPH_ID = "contreact"
"""The graph's key under `graphs` in langgraph.json; published threads belong to it."""

PUBLISH_INTERVAL_S = 2.0
"""How often the registry is checked for runs the dev server does not list yet."""


THREAD_STATUS: dict[ShownStatus, str] = {
    "running": "busy",
    "interrupted": "interrupted",  # killed or stopped: `contreact resume` continues it
    "paused": "interrupted",  # waiting for the operator: `contreact reply` answers
    "completed": "idle",
    "failed": "error",
}
"""The dev server's thread status for a CLI run, by the status `contreact list` shows."""


class RegisteredRunError(ValueError):
    """Studio was asked to delete the checkpoints of a run the CLI manages.

    A ValueError because the dev server answers those with 400 and the message, where
    any other exception would be a bare 500.
    """


async def _refuse_registered(registry: Engine, thread_id: str) -> None:
    record = await asyncio.to_thread(find_by_thread, registry, str(thread_id))
    if record is not None:
        raise RegisteredRunError(
            f"thread {thread_id} is contreact run {record.run_id!r}; its checkpoints are "
            "kept (the CLI's registry, events and memory refer to them)"
        )


class StudioSqliteSaver(ShortVersions, AsyncSqliteSaver):
    """AsyncSqliteSaver that keeps the checkpoints of runs registered by the CLI."""

    def __init__(self, conn: Any, *, registry: Engine) -> None:
        """Wrap an open aiosqlite connection.

        Args:
            conn: The aiosqlite connection to the CLI's database file.
            registry: Engine of the same database, for the run registry.
        """
        super().__init__(conn, serde=serializer())
        self.registry = registry

    async def adelete_thread(self, thread_id: str) -> None:
        """Delete a thread's checkpoints unless it is a registered run."""
        await _refuse_registered(self.registry, thread_id)
        await super().adelete_thread(thread_id)


class StudioPostgresSaver(ShortVersions, AsyncPostgresSaver):
    """AsyncPostgresSaver that keeps the checkpoints of runs registered by the CLI."""

    def __init__(self, conn: Any, *, registry: Engine) -> None:
        """Wrap an open psycopg async connection.

        Args:
            conn: Connection to the CLI's database (autocommit, dict rows).
            registry: Engine of the same database, for the run registry.
        """
        super().__init__(conn, serde=serializer())
        self.registry = registry

    async def adelete_thread(self, thread_id: str) -> None:
        """Delete a thread's checkpoints unless it is a registered run."""
        await _refuse_registered(self.registry, thread_id)
        await super().adelete_thread(thread_id)


@asynccontextmanager
async def open_async_saver(storage: Storage) -> AsyncIterator[BaseCheckpointSaver[Any]]:
    """Open an async checkpointer over `storage` (the same tables the CLI's saver uses).

    Args:
        storage: Where the runs live.

    Yields:
        A set-up saver; the connection closes when the context exits.
    """
    registry = await asyncio.to_thread(engine_for, storage)
    if storage.is_sqlite:
        import aiosqlite

        # The same tuning as every other connection (checkpoints.sqlite_file.sqlite_pragmas).
        async with aiosqlite.connect(
            str(storage.sqlite_path), timeout=busy_timeout_ms() / 1000
        ) as conn:
            for pragma in sqlite_pragmas():
                await conn.execute(pragma)
            sqlite_saver = StudioSqliteSaver(conn, registry=registry)
            await sqlite_saver.setup()
            yield sqlite_saver
        return
    from psycopg import AsyncConnection
    from psycopg.rows import dict_row

    # The connection options AsyncPostgresSaver.from_conn_string uses.
    async with await AsyncConnection.connect(
        storage.libpq_url, autocommit=True, prepare_threshold=0, row_factory=dict_row
    ) as conn:
        store_any_text(conn)
        pg_saver = StudioPostgresSaver(conn, registry=registry)
        await pg_saver.setup()
        yield pg_saver


def _thread_metadata(record: RunRecord) -> dict[str, Any]:
    # Not `run_id`: the server strips that key from thread metadata (it names its own runs).
    return {"contreact_run_id": record.run_id, "model": record.model, "source": "contreact-cli"}


async def _server_threads() -> dict[str, dict[str, Any]]:
    """The dev server's own records of its threads (status, error), by thread id.

    The server's API cannot set a thread's status (it derives it from the runs it drove),
    so this reads its runtime's store, in-process. Only `langgraph dev`'s in-memory
    runtime is supported; elsewhere (empty) statuses stay as the server computes them.
    """
    try:
        from langgraph_runtime.database import connect
    except (ImportError, ValueError):  # not inside a langgraph dev server
        return {}
    async with connect() as conn:
        store = getattr(conn, "store", None)
        threads = store.get("threads", []) if isinstance(store, dict) else []
        return {str(t.get("thread_id")): t for t in threads}


async def _sync_status(registry: Engine, record: RunRecord, thread: dict[str, Any] | None) -> None:
    """Make the thread list and the registry agree on a run's status.

    A CLI run's thread shows the registry's status (`THREAD_STATUS`); a Studio run that
    failed in the server is marked failed in the registry, with the server's error.
    """
    if thread is None:
        return
    if record.origin != "studio":
        thread["status"] = THREAD_STATUS[record.shown_status]
    elif record.status == "running" and thread.get("status") == "error":
        error = thread.get("error") or {}
        detail = error.get("message") if isinstance(error, dict) else str(error)
        reason = f"the Studio run failed: {detail or 'see the server log'}"
        await asyncio.to_thread(set_status, registry, record.run_id, "failed", reason=reason)


async def publish_runs(storage: Storage, interval_s: float = PUBLISH_INTERVAL_S) -> None:
    """Register every run of the registry as a dev-server thread, until cancelled.

    Runs started by the CLI while the server is up appear within `interval_s`, and their
    thread status follows the registry at the same pace. Threads are created through the
    server's own API in-process (langgraph_sdk's loopback client); only the status needs
    the runtime's store (`_set_thread_status`).

    Args:
        storage: Where the runs live.
        interval_s: Seconds between two looks at the registry.
    """
    from langgraph_sdk import get_client

    # Building an httpx client may read certificate files: not on the event loop.
    client = await asyncio.to_thread(get_client)
    registry = await asyncio.to_thread(engine_for, storage)
    published: set[str] = set()
    failing = False
    try:
        while True:
            try:
                records = await asyncio.to_thread(list_runs, registry)
                for record in records:
                    if record.thread_id in published:
                        continue
                    await client.threads.create(
                        thread_id=record.thread_id,
                        if_exists="do_nothing",
                        graph_id=STUDIO_GRAPH_ID,
                        metadata=_thread_metadata(record),
                    )
                    published.add(record.thread_id)
                threads = await _server_threads()
                for record in records:
                    await _sync_status(registry, record, threads.get(record.thread_id))
                failing = False
            except Exception as exc:  # noqa: BLE001 - the server must keep serving regardless
                # Early ticks can race the server's own start-up: say it once, keep trying.
                if not failing:
                    log.warning("contreact: cannot publish CLI runs to Studio yet: %s", exc)
                failing = True
            await asyncio.sleep(interval_s)
    finally:
        await client.aclose()


_publisher: asyncio.Task[None] | None = None


@asynccontextmanager
async def studio_checkpointer() -> AsyncIterator[BaseCheckpointSaver[Any]]:
    """The factory named in langgraph.json: the CLI's storage as an async checkpointer.

    The dev server enters it once per event loop it serves from and exits it at shutdown.
    The first entry also starts `publish_runs`.

    Yields:
        The saver over `resolve_storage()` (CONTREACT_HOME / CONTREACT_DB_URL / ./runs).
    """
    global _publisher
    storage = await asyncio.to_thread(resolve_storage)
    shown = storage.shown_url
    log.info("contreact: Studio uses the checkpoints in %s", shown)
    async with open_async_saver(storage) as saver:
        owner = _publisher is None
        if owner:
            _publisher = asyncio.create_task(publish_runs(storage))
        try:
            yield saver
        finally:
            if owner and _publisher is not None:
                task, _publisher = _publisher, None
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
