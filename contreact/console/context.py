"""What every page of the console shares: the storage, its engine, the templates, the feed.

The templates escape everything they insert (Jinja2's autoescape, for every template):
model text is never marked safe, so it shows as text wherever it lands, a `title`
attribute included.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader
from sqlalchemy import Engine
from starlette.requests import Request
from starlette.responses import HTMLResponse

from contreact.checkpoints.storage import Storage
from contreact.console.security import CSRF_FIELD, CSRF_HEADER

HERE = Path(__file__).parent
TEMPLATES = HERE / "templates"
STATIC = HERE / "static"


EVENT_NAMES = {
    "LLM_INVOCATION": "model call",
    "TOOL_CALL": "tool call",
    "OPERATOR_MESSAGE": "operator message",
    "HOOK": "hook",
    "INTERVENTION": "intervention",
    "CONTEXT_TRIM": "context trimmed",
    "RECORD_SKIPPED": "record skipped",
}
"""Event types as a person reads them (the others: lower case, spaced)."""


def event_name(kind: str) -> str:
    """An event type as the pages name it (`LLM_INVOCATION`: model call)."""
    return EVENT_NAMES.get(kind, kind.lower().replace("_", " "))


def template_environment() -> Environment:
    """The console's templates, every one autoescaped."""
    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["count"] = lambda n: f"{int(n):,}"
    env.filters["event_name"] = event_name
    env.filters["pretty"] = lambda value: json.dumps(
        value, ensure_ascii=False, indent=2, default=str
    )
    return env


@dataclass
class Console:
    """One console's storage and templates (in `app.state.console`)."""

    storage: Storage
    engine: Engine
    env: Environment
    token: bool
    """Whether the console asks for a token (shown on the page)."""

    def fragment(self, name: str, **values: Any) -> str:
        """A template rendered outside a request (the feed's rows)."""
        return self.env.get_template(name).render(**values)

    def page(self, request: Request, name: str, status: int = 200, **values: Any) -> HTMLResponse:
        """A template rendered for `request`, with the forgery token the page posts with."""
        token = request.scope.get("csrftoken")
        shared = {
            "request": request,
            "csrf": token() if callable(token) else "",
            "csrf_field": CSRF_FIELD,
            "csrf_header": CSRF_HEADER,
            "where": self.storage.shown,
        }
        html = self.env.get_template(name).render(**shared, **values)
        return HTMLResponse(html, status_code=status)


def console_of(request: Request) -> Console:
    """The console serving `request`."""
    found = request.app.state.console
    assert isinstance(found, Console)
    return found
