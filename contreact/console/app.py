"""The console's web application: its routes, its event streams and its guards, on Starlette.

`build_app` wires the pages (`pages`, `run_page`, `inbox`, `results`), the static files
vendored with the package (htmx and its server-sent-events extension, the stylesheet), the
one feed per process (`feed`), and puts all of it behind `security.protect`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp

from contreact.checkpoints.engines import engine_for
from contreact.checkpoints.storage import Storage
from contreact.console import inbox, pages, results, run_page
from contreact.console.context import STATIC, Console, template_environment
from contreact.console.feed import Feed, Renderers, stream
from contreact.console.overview import per_model
from contreact.console.security import protect


def _feed(console: Console) -> Feed:
    return Feed(
        console.engine,
        Renderers(
            row=lambda row: console.fragment("_run_row.html", row=row),
            summary=lambda rows: console.fragment("_summary.html", models=per_model(rows)),
            inbox_count=lambda count: console.fragment("_inbox_count.html", waiting=count),
        ),
    )


def _feed_of(request: Request) -> Feed:
    found = request.app.state.feed
    assert isinstance(found, Feed)
    return found


def overview_stream(request: Request) -> Response:
    """The overview's events: changed rows, the per-model summary, runs added."""
    return stream(_feed_of(request), request, ["overview"])


def run_stream(request: Request) -> Response:
    """A run page's events: the run changed."""
    return stream(_feed_of(request), request, [f"run:{request.path_params['run_id']}"])


def inbox_stream(request: Request) -> Response:
    """The inbox's events: a run paused, or its message was answered."""
    return stream(_feed_of(request), request, ["inbox"])


def page_stream(request: Request) -> Response:
    """The events every page takes: the inbox count in the navigation."""
    return stream(_feed_of(request), request, [])


def build_app(storage: Storage, *, token: str | None = None, bind: str = "127.0.0.1") -> ASGIApp:
    """The console over `storage`, guarded (see `console.security`).

    Args:
        storage: Where the runs are (resolved as every command resolves it).
        token: The token every request must carry (None: none, loopback only).
        bind: The address the console listens on (the Host names it answers).
    """
    console = Console(storage, engine_for(storage), template_environment(), bool(token))
    feed = _feed(console)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        watcher = asyncio.create_task(feed.watch())
        try:
            yield
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher

    routes = [
        *pages.ROUTES,
        *run_page.ROUTES,
        *inbox.ROUTES,
        *results.ROUTES,
        Route("/stream/overview", overview_stream),
        Route("/stream/runs/{run_id}", run_stream),
        Route("/stream/inbox", inbox_stream),
        Route("/stream/page", page_stream),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.console = console
    app.state.feed = feed
    return protect(app, token=token, bind=bind, posts=[*inbox.POSTS, *results.POSTS])
