"""The console over a PostgreSQL study with workers: an inbox reply puts the run back on the queue.

The study's worker is a process of its own in its own folder, as on another machine; the
console shares only the database. After the reply the console starts nothing itself: the
run goes back on the study's queue, a worker takes it, and the agent gets the reply once.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from playwright.sync_api import expect
from sqlalchemy import text

from support.backends import Backend
from support.cli import cli
from support.console import chromium, served
from support.stub import scripted_stub
from support.workers import Machine, wait_for

pytestmark = pytest.mark.postgres

ASK = {"tool_calls": [{"name": "send_message_to_operator", "arguments": {"message": "proceed?"}}]}
SCRIPT = {1: [ASK, {"content": "Reflection 1."}], 2: ["Reflection 2."]}


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as found:
        yield found


def status_of(storage: Any, run_id: str) -> str | None:
    from contreact.checkpoints.engines import engine_for
    from contreact.checkpoints.registry import RunNotFoundError, get_run

    try:
        return get_run(engine_for(storage), run_id).status
    except RunNotFoundError:
        return None  # not started yet


def jobs_of(storage: Any, run_id: str) -> list[str]:
    from contreact.checkpoints.engines import engine_for

    with engine_for(storage).connect() as conn:
        rows = conn.execute(
            text("SELECT status::text FROM procrastinate_jobs WHERE lock = :run ORDER BY id"),
            {"run": run_id},
        )
        return [str(s) for (s,) in rows]


def test_a_reply_in_the_inbox_puts_a_study_run_back_on_the_queue(
    tmp_path: Path, postgres_backend: Backend, browser: Any
) -> None:
    from contreact.checkpoints.engines import engine_for
    from contreact.checkpoints.event_store import read_events

    url = str(postgres_backend.db_url)
    storage = postgres_backend.storage()
    run_id = "asks.stub-model.r1"
    with scripted_stub(SCRIPT) as stub:
        config = tmp_path / "asks.yaml"
        study = {
            "batch": "asks",
            "models": ["stub-model"],
            "replicates": 1,
            "cycles": 2,
            "operator": {"mode": "queue"},
            "ollama": {"hosts": [stub.url]},
            "storage": {"url": url},
        }
        config.write_text(yaml.safe_dump(study), encoding="utf-8")
        queued = cli(
            postgres_backend, "batch", str(config), "--no-work"
        )  # asyncio: not beside the browser
        assert queued.returncode == 0, queued.stderr
        worker = Machine(tmp_path, "m1", url, "--forever")
        try:
            wait_for(lambda: status_of(storage, run_id) == "paused", 120, "the run pausing")
            with served(postgres_backend) as console:
                page = browser.new_page()
                page.goto(console.url + "inbox")
                message = page.locator(f'[data-testid="operator-message"][data-run-id="{run_id}"]')
                expect(message).to_contain_text("proceed?")
                message.locator('textarea[name="reply"]').fill("go ahead")
                message.get_by_role("button", name="Send reply").click()
                outcome = page.locator('[data-testid="reply-outcome"]')
                expect(outcome).to_have_attribute("data-outcome", "queued")
                wait_for(
                    lambda: status_of(storage, run_id) == "completed", 120, "a worker ending it"
                )
                page.close()
        finally:
            worker.signal(signal.SIGTERM)
            worker.proc.wait(timeout=30)
    # Another job for the run: the queue, not the console, drove it on. (A worker's sweep
    # may queue the answered run too, before the console does; the journal makes a second
    # delivery find the run done, so what counts is that the reply reached the agent once.)
    assert len(jobs_of(storage, run_id)) >= 2
    events = read_events(engine_for(storage), run_id)
    replies = [e["payload"]["reply"] for e in events if e["event_type"] == "OPERATOR_MESSAGE"]
    assert replies == ["go ahead"]
    assert not (postgres_backend.data_dir / "console").exists()  # no process of the console's
