"""Who may use the console, and what a page may do in the browser.

The console puts what models wrote into a browser, and one POST of it answers an agent:
* **Binding.** 127.0.0.1 by default; any address beyond this machine needs a token
  (`check_bind`, called by the command before anything starts).
* **Token.** With a token, every request (page, fragment, event stream, POST, static file)
  carries it as `Authorization: Bearer T`, or as the cookie a first `?token=T` sets (the
  address then loses the token, so it stays out of the history and of Referer headers);
  without it the answer is 401, with a wrong one 403.
* **Host.** Only the names the console was bound to are answered: a page of another site
  that rebinds its own name to 127.0.0.1 gets 400, not the console.
* **Forgery.** Every POST carries the signed double-submit token of `asgi-csrf`, whether
  or not a cookie came with it.
* **Content.** Everything is escaped by the templates; the Content-Security-Policy allows
  only the console's own scripts and styles, so model text that slipped through could
  still run nothing. Report files are served sandboxed.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Iterable
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qsl, urlencode

from asgi_csrf import asgi_csrf
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

TOKEN_COOKIE = "contreact_console"
CSRF_COOKIE = "contreact_csrf"
CSRF_FIELD = "csrftoken"
"""The form field a POST carries the forgery token in (`asgi-csrf`'s own name for it)."""
CSRF_HEADER = "x-csrftoken"

CONTENT_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)
"""No inline script or style, nothing from elsewhere, no frames around the console."""

REPORT_POLICY = "sandbox; default-src 'none'; img-src 'self' data:; style-src 'unsafe-inline'"
"""A report file is a document of its own: no script, no access to the console's origin."""


class BindError(ValueError):
    """The console would listen beyond this machine without a token."""


def is_loopback(host: str) -> bool:
    """Whether `host` (a name or an address) reaches this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None) -> None:
    """Refuse to listen on an address other machines reach without a token."""
    if not is_loopback(host) and not token:
        raise BindError(
            f"--bind {host} lets other machines reach the console: give it a --token "
            "(or $CONTREACT_UI_TOKEN) too, or bind 127.0.0.1"
        )


def allowed_hosts(bind: str) -> list[str]:
    """The Host names the console answers: loopback names, and the bound address or name."""
    names = ["127.0.0.1", "localhost", "[::1]"]
    if bind not in ("0.0.0.0", "::"):
        return [*names, bind if ":" not in bind else f"[{bind}]"]
    return ["*"]  # bound to every address, with a token: any name may reach it


def _cookies(scope: Scope) -> dict[str, str]:
    jar: SimpleCookie = SimpleCookie()
    for name, value in scope.get("headers", []):
        if name == b"cookie":
            jar.load(value.decode("latin-1"))
    return {key: morsel.value for key, morsel in jar.items()}


def _header(scope: Scope, wanted: bytes) -> str:
    for name, value in scope.get("headers", []):
        if name == wanted:
            return str(value.decode("latin-1"))
    return ""


class TokenGate:
    """Let through only requests that carry the console's token (see the module doc)."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.token = token.encode()

    def _matches(self, given: str) -> bool:
        return hmac.compare_digest(given.encode(), self.token)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer a request without the token itself; hand on one that carries it."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"))
        offered = [v for k, v in query if k == "token"]
        if offered:
            if not self._matches(offered[-1]):
                await _refuse(403, "wrong token")(scope, receive, send)
                return
            rest = urlencode([(k, v) for k, v in query if k != "token"])
            target = scope.get("path", "/") + (f"?{rest}" if rest else "")
            answer = RedirectResponse(target, status_code=303)
            answer.set_cookie(TOKEN_COOKIE, offered[-1], httponly=True, samesite="strict", path="/")
            await answer(scope, receive, send)
            return
        bearer = _header(scope, b"authorization")
        cookie = _cookies(scope).get(TOKEN_COOKIE)
        given = bearer[7:] if bearer.lower().startswith("bearer ") else cookie
        if given is None:
            await _refuse(401, "this console needs its token: open it with ?token=...")(
                scope, receive, send
            )
            return
        if not self._matches(given):
            await _refuse(403, "wrong token")(scope, receive, send)
            return
        await self.app(scope, receive, send)


def _refuse(status: int, text: str) -> Response:
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else {}
    return PlainTextResponse(text, status_code=status, headers=headers)


class SecurityHeaders:
    """Add the Content-Security-Policy and its companions to every answer."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Hand the request on; add the headers to its answer."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        sandboxed = str(scope.get("path", "")).startswith("/reports/")

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                policy = REPORT_POLICY if sandboxed else CONTENT_POLICY
                if not str(scope.get("path", "")).startswith("/static/"):
                    # Pages show live state: never kept, never shown again from a cache.
                    headers.append((b"cache-control", b"no-store"))
                headers += [
                    (b"content-security-policy", policy.encode()),
                    (b"x-content-type-options", b"nosniff"),
                    (b"referrer-policy", b"no-referrer"),
                    (b"x-frame-options", b"DENY"),
                ]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, with_headers)


def protect(app: ASGIApp, *, token: str | None, bind: str, posts: Iterable[str]) -> ASGIApp:
    """`app` behind the console's guards, outermost first: host, token, headers, forgery.

    Args:
        app: The console's routes.
        token: The token every request must carry (None: loopback only, no token).
        bind: The address the console listens on.
        posts: The paths that take POSTs (each is protected even without cookies).
    """
    guarded: Any = asgi_csrf(
        app,
        signing_secret=None,  # a fresh secret per process: a restart asks pages anew
        cookie_name=CSRF_COOKIE,
        http_header=CSRF_HEADER,
        always_protect=set(posts),
        cookie_samesite="Strict",
    )
    guarded = SecurityHeaders(guarded)
    if token:
        guarded = TokenGate(guarded, token)
    return TrustedHostMiddleware(guarded, allowed_hosts=allowed_hosts(bind))
