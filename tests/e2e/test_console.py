"""The lab console in a real browser (SQLite): live overview, inbox replies, hostile text.

Runs are driven by the real engine against the stub over HTTP; the console is served from
this process (`support.console.served`) and read by headless chromium. Every wait is on a
condition in the page or the database, never a sleep.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from contreact.stub import StubServer
from support.backends import Backend
from support.cli import cli_in_process, cli_start
from support.console import chromium, served
from support.runs import write_config
from support.stub import scripted_stub
from support.workers import wait_for

WAIT_MS = 60_000


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as found:
        yield found


def ask(message: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "send_message_to_operator", "arguments": {"message": message}}]}


def status(backend: Backend, run_id: str) -> str:
    from contreact.checkpoints.engines import engine_for
    from contreact.checkpoints.registry import get_run

    return get_run(engine_for(backend.storage()), run_id).status


def operator_events(backend: Backend, run_id: str) -> list[dict[str, Any]]:
    from contreact.checkpoints.engines import engine_for
    from contreact.checkpoints.event_store import read_events

    events = read_events(engine_for(backend.storage()), run_id)
    return [e["payload"] for e in events if e["event_type"] == "OPERATOR_MESSAGE"]


def paused_run(tmp_path: Path, backend: Backend, server: StubServer, run_id: str) -> None:
    """A run of two cycles that waits on the operator in its first."""
    config = write_config(
        tmp_path / f"{run_id}.yaml",
        backend,
        run_id=run_id,
        cycles=2,
        ollama={"host": server.url},
        operator={"mode": "queue"},
    )
    paused = cli_in_process(backend, "run", str(config))
    assert paused.returncode == 3, paused.stderr


ONE_QUESTION = {1: [ask("are you there?"), {"content": "Reflection 1."}], 2: ["Reflection 2."]}


def test_a_run_started_after_the_overview_opened_appears_and_advances_without_a_reload(
    tmp_path: Path, sqlite_backend: Backend, browser: Any
) -> None:
    with StubServer(latency_ms=250).start() as stub, served(sqlite_backend) as console:
        page: Page = browser.new_page()
        page.goto(console.url)
        expect(page.get_by_text("No runs yet")).to_be_visible()
        expect(page.locator("#live[data-state=open]")).to_have_count(1, timeout=WAIT_MS)
        page.evaluate("window.__same_page = true")
        config = write_config(
            tmp_path / "live.yaml",
            sqlite_backend,
            run_id="live-1",
            cycles=4,
            ollama={"host": stub.url},
        )
        proc = cli_start(sqlite_backend, "run", str(config))
        row = page.locator('[data-testid="run"][data-run-id="live-1"]')
        expect(row).to_be_visible(timeout=WAIT_MS)
        cycle = row.locator('[data-testid="cycle"]')
        # It advances in place: a cycle under way, then later ones, then the end.
        expect(row).to_contain_text(re.compile(r"in [1-3]\b"), timeout=WAIT_MS)
        expect(cycle).to_have_text(re.compile(r"^[1-3]/4$"), timeout=WAIT_MS)
        expect(cycle).to_have_text("4/4", timeout=WAIT_MS)
        expect(row.locator(".chip")).to_have_text("completed", timeout=WAIT_MS)
        assert proc.wait(timeout=60) == 0
        assert page.evaluate("window.__same_page") is True  # never reloaded
        # The row links to the run's page, which shows the transcript and the memory.
        row.get_by_role("link", name="live-1").click()
        expect(page.get_by_role("heading", name="live-1")).to_be_visible()
        expect(page.locator("details.cycle")).to_have_count(4)
        expect(page.locator('[data-testid="memory"]')).to_be_visible()
        page.close()


def test_an_inbox_reply_reaches_the_agent_once_and_the_run_completes(
    tmp_path: Path, sqlite_backend: Backend, browser: Any
) -> None:
    with scripted_stub(ONE_QUESTION) as stub:
        paused_run(tmp_path, sqlite_backend, stub, "asks")
        with served(sqlite_backend) as console:
            page: Page = browser.new_page()
            page.goto(console.url)
            page.get_by_role("link", name="Operator").click()
            message = page.locator('[data-testid="operator-message"][data-run-id="asks"]')
            expect(message).to_contain_text("are you there?")
            message.locator('textarea[name="reply"]').fill("yes, I am here")
            message.get_by_role("button", name="Send reply").click()
            outcome = page.locator('[data-testid="reply-outcome"][data-run-id="asks"]')
            expect(outcome).to_have_attribute("data-outcome", "resumed")
            wait_for(
                lambda: status(sqlite_backend, "asks") == "completed", 60, "the run completing"
            )
            # The answered message leaves the inbox (as the page finds it now).
            page.reload()
            expect(page.locator('[data-testid="operator-message"]')).to_have_count(0)
            expect(page.get_by_text("No agent is waiting for you")).to_be_visible()
            page.close()
        tool_results = [
            m["content"]
            for r in stub.requests()
            for m in r["body"]["messages"][-1:]
            if m["role"] == "tool"
        ]
    assert tool_results == ["yes, I am here"]  # the agent got it, once
    events = operator_events(sqlite_backend, "asks")
    assert [(e["reply"], e["policy"]) for e in events] == [("yes, I am here", "queue")]


def test_two_browsers_answering_at_once_one_wins_and_the_other_is_told(
    tmp_path: Path, sqlite_backend: Backend, browser: Any
) -> None:
    with scripted_stub(ONE_QUESTION) as stub:
        paused_run(tmp_path, sqlite_backend, stub, "race")
        with served(sqlite_backend) as console:
            pages = [browser.new_context().new_page() for _ in range(2)]
            for n, page in enumerate(pages):
                page.goto(console.url + "inbox")
                page.locator('textarea[name="reply"]').fill(f"answer from browser {n}")
            for page in pages:  # both sent before either answer is in
                page.get_by_role("button", name="Send reply").click(no_wait_after=True)
            outcomes = [page.locator('[data-testid="reply-outcome"]') for page in pages]
            for found in outcomes:
                expect(found).to_have_count(1, timeout=WAIT_MS)
            got = [str(found.get_attribute("data-outcome")) for found in outcomes]
            assert sorted(got) == ["resumed", "taken"]
            winner, loser = got.index("resumed"), got.index("taken")
            expect(outcomes[loser]).to_contain_text("Another reply reached this agent first")
            wait_for(
                lambda: status(sqlite_backend, "race") == "completed", 60, "the run completing"
            )
            for page in pages:
                page.context.close()
    events = operator_events(sqlite_backend, "race")
    assert [e["reply"] for e in events] == [f"answer from browser {winner}"]


HOSTILE = '<img src=x onerror="window.__xss=1"><script>window.__xss=2</script>"><b>bold</b>'


def test_hostile_html_from_the_model_shows_as_text(
    tmp_path: Path, sqlite_backend: Backend, browser: Any
) -> None:
    write = {"tool_calls": [{"name": "write", "arguments": {"key": "note", "value": HOSTILE}}]}
    script = {1: [write, {"content": HOSTILE}], 2: [ask(HOSTILE), {"content": "Reflection 2."}]}
    with scripted_stub(script) as stub:
        paused_run(tmp_path, sqlite_backend, stub, "hostile")
    with served(sqlite_backend) as console:
        page: Page = browser.new_page()
        for path, where in (
            ("runs/hostile", ".reflection pre"),  # a reflection, in the transcript
            ("runs/hostile", '[data-testid="memory"] pre'),  # a memory value
            ("inbox", "blockquote.said"),  # an operator message
            ("compare?run=hostile", ".reflection"),
        ):
            page.goto(console.url + path)
            expect(page.locator(where).filter(has_text=HOSTILE).first).to_be_visible()
            assert page.evaluate("window.__xss") is None, path
            assert page.locator("main b:text-is('bold')").count() == 0, path
            assert page.locator("main img[src='x']").count() == 0, path
        page.close()


def test_posts_without_the_forgery_token_are_refused(
    tmp_path: Path, sqlite_backend: Backend
) -> None:
    import httpx

    with scripted_stub(ONE_QUESTION) as stub:
        paused_run(tmp_path, sqlite_backend, stub, "forged")
    with served(sqlite_backend) as console:
        form = {"run": "forged", "ask": "", "reply": "from another site"}
        # A page of another site posts a form: no cookie, no token.
        bare = httpx.post(console.url + "inbox/reply", data=form)
        assert bare.status_code == 403
        with httpx.Client(base_url=console.url) as client:
            client.get("/")  # the console's cookie, but the form lacks the token
            assert client.post("/inbox/reply", data=form).status_code == 403
            assert client.post("/results/report", data={"batch": ""}).status_code == 403
    assert status(sqlite_backend, "forged") == "paused"
    assert operator_events(sqlite_backend, "forged") == []
