"""`contreact ui` as a user starts it: its address line, its token, its refusals.

The command runs as a process of its own (`support.console.ConsoleProcess`); requests come
from httpx and from headless chromium.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from support.backends import Backend
from support.cli import cli_in_process
from support.console import ConsoleProcess, chromium

TOKEN = "s3cret-token"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as found:
        yield found


def test_it_starts_on_an_empty_storage_prints_its_address_and_stops_on_ctrl_c(
    sqlite_backend: Backend,
) -> None:
    console = ConsoleProcess(sqlite_backend)
    try:
        assert console.url.startswith("http://127.0.0.1:")
        assert str(sqlite_backend.data_dir / "contreact.db") in console.line
        page = httpx.get(console.url)
        assert page.status_code == 200
        assert "No runs yet" in page.text
        # Another console on the same port: one line, exit 2.
        port = console.url.rstrip("/").rsplit(":", 1)[1]
        taken = cli_in_process(sqlite_backend, "ui", "--port", port)
        assert taken.returncode == 2
        assert taken.stderr.count("\n") == 1 and f"port {port}" in taken.stderr
    finally:
        code = console.stop()
    assert code in (0, 130)


def test_a_storage_that_does_not_exist_is_refused_and_not_made(sqlite_backend: Backend) -> None:
    refused = cli_in_process(sqlite_backend, "ui", "--port", "0")
    assert refused.returncode == 2
    assert refused.stderr.count("\n") == 1 and str(sqlite_backend.data_dir) in refused.stderr
    assert not sqlite_backend.data_dir.exists()


def test_binding_beyond_this_machine_needs_a_token(sqlite_backend: Backend) -> None:
    refused = cli_in_process(sqlite_backend, "ui", "--bind", "0.0.0.0", "--port", "0")
    assert refused.returncode == 2
    assert refused.stdout == ""
    assert refused.stderr.count("\n") == 1
    assert "--bind 0.0.0.0" in refused.stderr and "--token" in refused.stderr


def test_with_a_token_every_page_stream_and_post_needs_it(
    sqlite_backend: Backend, browser: Any
) -> None:
    console = ConsoleProcess(sqlite_backend, "--token", TOKEN)
    url = console.url
    try:
        for path in ("", "inbox", "runs/x", "stream/overview", "static/console.css", "results"):
            assert httpx.get(url + path).status_code == 401, path
            assert httpx.get(url + path + "?token=wrong").status_code == 403, path
            wrong = {"Authorization": "Bearer wrong"}
            assert httpx.get(url + path, headers=wrong).status_code == 403, path
        assert httpx.post(url + "inbox/reply", data={"run": "x", "reply": "y"}).status_code == 401
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        assert httpx.get(url, headers=bearer).status_code == 200
        with httpx.stream("GET", url + "stream/page", headers=bearer) as events:
            assert events.status_code == 200
            assert events.headers["content-type"].startswith("text/event-stream")
        # ?token= once: a cookie, and the address loses the token.
        with httpx.Client(base_url=url) as client:
            first = client.get("/inbox?token=" + TOKEN)
            assert first.status_code == 303 and first.headers["location"] == "/inbox"
            assert "httponly" in first.headers["set-cookie"].lower()
            assert client.get("/inbox").status_code == 200
        # Another site's name for this address is not answered (DNS rebinding).
        assert httpx.get(url, headers={**bearer, "Host": "evil.example"}).status_code == 400
        page = browser.new_page()
        page.goto(url + "?token=" + TOKEN)
        assert page.url == url
        expect(page.get_by_text("No runs yet")).to_be_visible()
        expect(page.locator("#live[data-state=open]")).to_have_count(1)  # the stream too
        page.close()
    finally:
        console.stop()
