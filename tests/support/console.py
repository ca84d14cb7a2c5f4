"""The console for tests: served in this process or as `contreact ui`, and a real browser.

The browser is Debian's chromium driven by Playwright (Playwright cannot download its own
browser here); a test module shares one browser, each test opens its own contexts. The
console is served from this process (`served`, no interpreter start) unless the command
itself is the subject (`ConsoleProcess`).
"""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from support.backends import Backend
from support.cli import cli_env
from support.paths import ROOT

CHROMIUM = "/usr/bin/chromium"
BROWSER_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ADDRESS = re.compile(r"contreact console at (http://\S+/) ")


@contextmanager
def chromium() -> Iterator[Any]:
    """A headless chromium (Playwright's `Browser`); skips without one, fails so in CI."""
    import os

    import pytest
    from playwright.sync_api import sync_playwright

    from support.ci import IN_CI

    if not os.path.exists(CHROMIUM):
        why = f"the console's browser tests need Debian's chromium at {CHROMIUM}"
        if IN_CI:
            pytest.fail(why)
        pytest.skip(why + " (apt-get install -y chromium)")

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
        try:
            yield browser
        finally:
            browser.close()


class Served:
    """The console over a storage, served by uvicorn on a thread of this process."""

    def __init__(self, storage: Any, token: str | None = None) -> None:
        import uvicorn

        from contreact.console.app import build_app
        from contreact.console.server import address, listen

        sock = listen("127.0.0.1", 0)
        self.url = address(sock)
        config = uvicorn.Config(
            build_app(storage, token=token),
            log_level="warning",
            access_log=False,
            lifespan="on",
            timeout_graceful_shutdown=1,
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [sock]}, name="console", daemon=True
        )
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise AssertionError("the console did not start")
            time.sleep(0.02)

    def stop(self) -> None:
        """Stop serving (open event streams are closed)."""
        from sse_starlette.sse import AppStatus

        # A server on a thread gets no signal: its event streams are told to end here.
        AppStatus.should_exit = True
        self.server.should_exit = True
        try:
            self.thread.join(timeout=10)
        finally:
            AppStatus.should_exit = False


@contextmanager
def served(backend: Backend, token: str | None = None) -> Iterator[Served]:
    """The console over `backend`'s storage while the block runs."""
    console = Served(backend.storage(), token)
    try:
        yield console
    finally:
        console.stop()


class ConsoleProcess:
    """`contreact ui` as a user starts it, with the address it printed."""

    def __init__(self, backend: Backend, *args: str) -> None:
        if backend.db_url is None and not backend.data_dir.exists():
            backend.make()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "contreact", *backend.cli_args, "ui", "--port", "0", *args],
            cwd=ROOT,
            env=cli_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            stdin=subprocess.DEVNULL,
        )
        assert self.proc.stdout is not None
        self.line = self.proc.stdout.readline()
        found = ADDRESS.search(self.line)
        if found is None:
            self.stop()
            raise AssertionError(f"no address printed: {self.line!r} {self.proc.stderr!r}")
        self.url = found.group(1)

    def stop(self) -> int:
        """Stop it as Ctrl-C does; its exit code."""
        import signal

        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            return self.proc.wait(timeout=20)
        finally:
            for stream in (self.proc.stdout, self.proc.stderr):
                if stream is not None:
                    stream.close()
