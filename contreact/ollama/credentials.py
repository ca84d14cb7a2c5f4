"""Basic-auth credentials in an Ollama host URL: sent to that host, never kept with a run.

`http://user:password@host:11434` is how Ollama's own clients take credentials for a
server behind an authenticating proxy. The host a run records and shows (its run record
and stored config, events, errors, `show`, `list`, reports) is the URL without them, so
that no password reaches a database, a JSONL log, a terminal or a report. The
credentials stay in this process's memory, keyed by that URL, and every HTTP client that
talks to the host is handed them as httpx's Basic auth. A `resume` in a new process
needs them again: from `--host` or `OLLAMA_HOST`. A batch hands them to its runs' child
processes in their environment (`CONTREACT_OLLAMA_CREDENTIALS`), never in a file.
"""

from __future__ import annotations

import base64
import json
import os
import re
import threading
from collections.abc import Generator
from functools import lru_cache
from typing import TYPE_CHECKING
from urllib.parse import unquote

if TYPE_CHECKING:
    import httpx

ENV = "CONTREACT_OLLAMA_CREDENTIALS"
"""How a parent process (a batch) hands its credentials to its children: JSON host -> [user,
password], in the environment only."""

_known: dict[str, tuple[str, str]] = {}
_lock = threading.Lock()

_USERINFO = re.compile(r"(?<=://)[^/@\s]*@")


def split_credentials(url: str) -> tuple[str, tuple[str, str] | None]:
    """`url` without its `user:password@`, and the (percent-decoded) user and password."""
    text = url.strip()
    scheme, sep, rest = text.partition("://")
    if not sep:
        scheme, rest = "", text
    netloc, slash, path = rest.partition("/")
    if "@" not in netloc:
        return text, None
    userinfo, _, hostport = netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    return f"{scheme}{sep}{hostport}{slash}{path}", (unquote(user), unquote(password))


def hide_credentials(text: str) -> str:
    """`text` with the `user:password@` of any URL in it removed (for messages)."""
    return _USERINFO.sub("", text)


def remember(host: str, credentials: tuple[str, str]) -> None:
    """Send `credentials` to `host` (a resolved URL without them) from now on."""
    with _lock:
        _known[host] = credentials


def credentials_for(url: str) -> tuple[str, str] | None:
    """The credentials remembered for the host `url` is on (a base URL or a request's URL)."""
    with _lock:
        known = {**_inherited(os.environ.get(ENV, "")), **_known}
    for host in sorted(known, key=len, reverse=True):
        if url == host or url.startswith(host.rstrip("/") + "/"):
            return known[host]
    return None


def for_children() -> dict[str, str]:
    """Environment entries that give a child process this process's credentials."""
    with _lock:
        known = {**_inherited(os.environ.get(ENV, "")), **_known}
    return {ENV: json.dumps({h: list(c) for h, c in known.items()})} if known else {}


@lru_cache(maxsize=4)
def _inherited(text: str) -> dict[str, tuple[str, str]]:
    """The credentials a parent handed down (nothing, if the variable is unreadable)."""
    try:
        data = json.loads(text) if text else {}
        return {str(h): (str(c[0]), str(c[1])) for h, c in data.items()}
    except (ValueError, TypeError, LookupError, AttributeError):
        return {}


@lru_cache(maxsize=1)
def ollama_auth() -> httpx.Auth:
    """The httpx auth that sends each request the Basic credentials of its host, if any.

    Looked up per request, not per client: clients are cached for the process, and a run
    resumed with `--host http://user:password@...` must not reuse one built without them.
    """
    import httpx

    class _HostAuth(httpx.Auth):
        def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response]:
            credentials = credentials_for(str(request.url))
            if credentials is not None:
                token = base64.b64encode(":".join(credentials).encode()).decode()
                request.headers["Authorization"] = f"Basic {token}"
            yield request

        def __repr__(self) -> str:
            return "<Basic auth from the host URL>"

    return _HostAuth()
