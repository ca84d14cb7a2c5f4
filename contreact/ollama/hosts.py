"""Where an Ollama host setting points: a URL read exactly as Ollama's own client reads it.

Every place that reaches Ollama (a run, doctor, a batch, PEI) resolves its host through here,
so `OLLAMA_HOST=0.0.0.0` and `:11500` mean what they mean to `ollama` itself.
"""

from __future__ import annotations

import ipaddress
import os
from urllib.parse import urlsplit

from contreact.ollama.credentials import remember, split_credentials

DEFAULT_OLLAMA_PORT = 11434


def resolve_host(value: str | None) -> str:
    """The base URL a host setting means, read exactly as Ollama's own client reads it.

    Ollama servers are usually configured with `OLLAMA_HOST=0.0.0.0` or `127.0.0.1`: no
    scheme and no port. The `ollama` Python client (`ollama._client._parse_host`) takes a
    missing scheme as http, a missing port as 11434 (80/443 only when the scheme is given),
    `:PORT` alone as 127.0.0.1, brackets IPv6 addresses and keeps a path prefix (a proxy).
    Every place that reaches Ollama (run, resume, doctor, batch, chat) resolves through here.
    A `user:password@` is taken out and remembered for this process only (sent as Basic
    auth, never recorded: `contreact.ollama.credentials`).
    """
    text, credentials = split_credentials(value or "")
    port = DEFAULT_OLLAMA_PORT
    scheme, _, hostport = text.partition("://")
    if not hostport:
        scheme, hostport = "http", text
    elif scheme == "http":
        port = 80
    elif scheme == "https":
        port = 443
    split = urlsplit(f"{scheme}://{hostport}")
    host = split.hostname or "127.0.0.1"
    try:
        port = split.port or port
    except ValueError:
        raise ValueError(f"host {text!r} has an invalid port") from None
    try:
        if isinstance(ipaddress.ip_address(host), ipaddress.IPv6Address):
            host = f"[{host}]"
    except ValueError:
        pass
    path = split.path.strip("/")
    resolved = f"{scheme}://{host}:{port}/{path}" if path else f"{scheme}://{host}:{port}"
    if credentials is not None:
        remember(resolved, credentials)
    return resolved


def default_ollama_host() -> str:
    """`OLLAMA_HOST` as Ollama's client reads it, else Ollama's local default."""
    return resolve_host(os.environ.get("OLLAMA_HOST"))
