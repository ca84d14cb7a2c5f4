"""The console's one watcher of the storage, and the event streams of the open pages.

A console process has one `Feed`, however many tabs are open: it looks at the storage
every `POLL_S` while any page listens, with a few cheap reads (the events committed since
its last look, by id; the registry without configs; the leases; the planned runs), and
tells each page what changed. The overview is sent the changed runs' rows rendered once
for every tab; a run page, the inbox and the navigation's inbox count are told to fetch
what they show. Nobody listening, nothing is read.

A page that starts listening is first told to refresh: whatever changed between its load
and the watcher's first look is then on screen too (and after a dropped connection).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine, func, select
from sse_starlette.sse import EventSourceResponse
from starlette.requests import Request

from contreact.checkpoints.run_record import record_from_row
from contreact.checkpoints.schema import batch_runs, events, leases, runs
from contreact.console.overview import Pace, RunRow, pace_of, read_rows, saw_event, waiting_count

log = logging.getLogger("contreact.console")

POLL_S = 1.0
"""How often the storage is looked at while a page listens."""
BACKLOG = 5000
"""The most new events read in one look; past it the runs they belong to are read again."""
QUEUE_LIMIT = 256
"""Messages held for a page that does not read them; past it the page is told to refresh."""
PING_S = 15
"""A comment sent on a quiet stream, so proxies and browsers keep it open."""

Message = tuple[str, str, str]
"""(topic, event, data): `overview`, `inbox`, `run:ID` or `*` (every page)."""


@dataclass(eq=False)
class Listener:
    """One open page's stream."""

    topics: frozenset[str]
    queue: asyncio.Queue[tuple[str, str]] = field(
        default_factory=lambda: asyncio.Queue(QUEUE_LIMIT)
    )

    def tell(self, event: str, data: str) -> None:
        """Queue a message; a page that fell behind is told to refresh instead."""
        try:
            self.queue.put_nowait((event, data))
        except asyncio.QueueFull:
            while not self.queue.empty():
                self.queue.get_nowait()
            self.queue.put_nowait(("refresh", ""))


@dataclass
class Renderers:
    """How the feed turns rows into the overview's HTML (the templates are the app's)."""

    row: Callable[[RunRow], str]
    summary: Callable[[list[RunRow]], str]
    inbox_count: Callable[[int], str]


_REGISTRY_COLUMNS = [c for c in runs.c if c.name != "config"]


class Feed:
    """Watches one storage for the pages that listen (see the module doc)."""

    def __init__(self, engine: Engine, render: Renderers) -> None:
        self.engine = engine
        self.render = render
        self.listeners: set[Listener] = set()
        self._primed = False
        self._lock = asyncio.Lock()
        self._after = 0
        self._states: dict[str, tuple[object, ...]] = {}
        self._leases: dict[str, str] = {}
        self._plans = 0
        self._paces: dict[str, Pace] = {}
        self.rows: dict[str, RunRow] = {}
        """The overview's rows as last read: changed ones are read again, the summary is
        counted from all of them."""

    # Listening ---------------------------------------------------------------------------

    async def join(self, topics: Iterable[str]) -> Listener:
        """A new page's listener, told to refresh once the watcher has looked."""
        listener = Listener(frozenset([*topics, "*"]))
        async with self._lock:
            if not self._primed:
                await asyncio.to_thread(self._prime)
            self.listeners.add(listener)
        listener.tell("refresh", "")
        return listener

    def leave(self, listener: Listener) -> None:
        """A page closed: once none listens, the watcher stops looking."""
        self.listeners.discard(listener)
        if not self.listeners:
            self._primed = False

    async def watch(self) -> None:
        """Look at the storage every `POLL_S` while pages listen (the app's lifespan runs it)."""
        while True:
            await asyncio.sleep(POLL_S)
            if not self.listeners:
                continue
            async with self._lock:
                if not self._primed:
                    continue
                try:
                    messages = await asyncio.to_thread(self._look)
                except Exception as exc:  # noqa: BLE001 - a database fault must not end the feed
                    log.warning("the console could not read the storage: %s", exc)
                    continue
            for listener in list(self.listeners):
                for topic, event, data in messages:
                    if topic in listener.topics:
                        listener.tell(event, data)

    # Looking -----------------------------------------------------------------------------

    def _prime(self) -> None:
        self._look(first=True)
        self._primed = True

    def _look(self, first: bool = False) -> list[Message]:
        """What changed since the last look, as messages to the pages that show it."""
        with self.engine.connect() as conn:
            fresh = conn.execute(
                select(
                    events.c.id,
                    events.c.run_id,
                    events.c.cycle,
                    events.c.event_type,
                    events.c.timestamp,
                )
                .where(events.c.id > self._after)
                .order_by(events.c.id)
                .limit(BACKLOG)
            ).all()
            states = {str(row[0]): _state(row) for row in conn.execute(select(*_REGISTRY_COLUMNS))}
            held = {
                str(r): str(w)
                for r, w in conn.execute(
                    select(leases.c.run_id, leases.c.worker).where(leases.c.released.is_(False))
                )
            }
            plans = int(conn.execute(select(func.count()).select_from(batch_runs)).scalar_one())
            if first:
                newest = conn.execute(select(func.max(events.c.id))).scalar()
        added, removed = set(states) - set(self._states), set(self._states) - set(states)
        replanned = plans != self._plans
        reshaped = bool(added or removed) or replanned
        # A run whose registry row or lease changed is read again whole (a new one read for
        # the first time); one that only logged events is brought up to them here.
        reread = {r for r, s in states.items() if self._states.get(r) != s}
        reread |= set(held) ^ set(self._leases)
        reread |= {r for r, w in held.items() if self._leases.get(r, w) != w}
        if len(fresh) == BACKLOG:
            reread |= {str(row.run_id) for row in fresh}
        was_waiting = {r for r, s in self._states.items() if s[0] == "paused"}
        waiting = {r for r, s in states.items() if s[0] == "paused"}
        self._states, self._leases, self._plans = states, held, plans
        if first:
            self._after = int(newest or 0)
            self.rows = {r.run_id: r for r in read_rows(self.engine)}
            self._paces.clear()
            return []
        changed = set(reread)
        for event in fresh:
            self._after = max(self._after, int(event.id))
            run_id = str(event.run_id)
            row = self.rows.get(run_id)
            if row is None or run_id in reread:
                continue
            if run_id not in self._paces:
                with self.engine.connect() as conn:
                    self._paces[run_id] = pace_of(conn, row)
            saw_event(
                row,
                self._paces[run_id],
                int(event.cycle),
                str(event.event_type),
                str(event.timestamp),
            )
            changed.add(run_id)
        for run_id in removed:
            self.rows.pop(run_id, None)
        if replanned:
            self.rows = {r.run_id: r for r in read_rows(self.engine)}
        elif reread:
            self.rows.update({r.run_id: r for r in read_rows(self.engine, reread)})
        for run_id in reread:
            self._paces.pop(run_id, None)
        return self._messages(changed, reshaped, waiting != was_waiting)

    def _messages(self, changed: Collection[str], reshaped: bool, inbox: bool) -> list[Message]:
        messages: list[Message] = [(f"run:{r}", "run", "") for r in sorted(changed)]
        overview = any("overview" in listener.topics for listener in self.listeners)
        if overview and reshaped:
            messages.append(("overview", "runs", ""))
        elif overview and changed:
            messages += [
                ("overview", f"run-{r}", self.render.row(self.rows[r]))
                for r in sorted(changed)
                if r in self.rows
            ]
            messages.append(("overview", "summary", self.render.summary(list(self.rows.values()))))
        if inbox or reshaped:
            count = waiting_count(list(self.rows.values()))
            messages += [
                ("inbox", "inbox", ""),
                ("*", "inbox-count", self.render.inbox_count(count)),
            ]
        return messages


def _state(row: Any) -> tuple[object, ...]:
    """What of a registry row shows on a page: status, reason, host, and whether it beats."""
    status = str(row.status)
    # Only a running run's driver can stop beating (for a local one, a look at /proc).
    driven = status == "running" and record_from_row({**row._mapping, "config": "{}"}).driven
    return (status, row.reason, row.updated_at, driven, row.host)


def stream(feed: Feed, request: Request, topics: Iterable[str]) -> EventSourceResponse:
    """The server-sent events of one page, for `topics`."""
    chosen = list(topics)

    async def messages() -> AsyncIterator[dict[str, str]]:
        listener = await feed.join(chosen)
        try:
            while True:
                event, data = await listener.queue.get()
                yield {"event": event, "data": data}
        finally:
            feed.leave(listener)

    return EventSourceResponse(messages(), ping=PING_S)
