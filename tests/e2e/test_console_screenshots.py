"""The console's pages as a researcher sees them: a screenshot of each, for docs/console.md.

A small study is made with the stub (a batch of two models, a fork, a run waiting on the
operator, a failed run, a run going on, PEI ratings set by hand) and every page is opened
in chromium. The screenshots go to docs/console/ with `CONTREACT_WRITE_SCREENSHOTS=1`, to
the test's folder otherwise; either way each page must show what it is for.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from playwright.sync_api import Page, expect

from contreact.stub import StubServer
from support.backends import Backend
from support.batches import run_batch
from support.cli import cli_in_process, cli_start
from support.console import chromium, served
from support.paths import ROOT
from support.runs import write_config
from support.workers import wait_for

MODELS = ["llama3.1:8b", "qwen3:8b"]
VIEW = {"width": 1440, "height": 900}


def study(tmp_path: Path, backend: Backend, server: StubServer) -> list[str]:
    """A batch, a fork of one of its runs, a run waiting on the operator, a failed run."""
    from contreact.analysis.pei.evaluation import set_level
    from contreact.checkpoints.engines import engine_for
    from contreact.checkpoints.registry import get_run

    runs = run_batch(backend, server, "pilot", MODELS, replicates=2, cycles=6)
    forked = cli_in_process(
        backend, "fork", runs[0], "--cycle", "3", "--as", "pilot-fork", "--model", MODELS[1]
    )
    assert forked.returncode == 0, forked.stderr
    asks = write_config(
        tmp_path / "asks.yaml",
        backend,
        run_id="explorer-q",
        model=MODELS[0],
        cycles=4,
        ollama={"host": server.url},
        operator={"mode": "queue"},
    )
    assert cli_in_process(backend, "run", str(asks)).returncode == 3
    down = write_config(
        tmp_path / "down.yaml",
        backend,
        run_id="explorer-down",
        cycles=3,
        ollama={"host": "http://127.0.0.1:9", "retries": 0, "timeout_s": 2},
    )
    assert cli_in_process(backend, "run", str(down)).returncode in (1, 2)
    storage = backend.storage()
    engine = engine_for(storage)
    for run_id, levels in zip(runs, ((3, 4), (2, 5), (6, 3), (5, 5)), strict=True):
        for evaluator, level in zip(MODELS, levels, strict=True):
            set_level(storage, get_run(engine, run_id), evaluator, level)
    return runs


def shoot(page: Page, folder: Path, name: str) -> None:
    page.wait_for_load_state("networkidle")
    page.screenshot(path=str(folder / f"{name}.png"))


def test_every_page_shows_what_it_is_for(tmp_path: Path, sqlite_backend: Backend) -> None:
    folder = (
        ROOT / "docs" / "console" if os.environ.get("CONTREACT_WRITE_SCREENSHOTS") else tmp_path
    )
    folder.mkdir(parents=True, exist_ok=True)
    with StubServer(models=MODELS).start() as server:
        runs = study(tmp_path, sqlite_backend, server)
    with StubServer(models=MODELS, latency_ms=400).start() as slow:
        going = write_config(
            tmp_path / "going.yaml",
            sqlite_backend,
            run_id="explorer-long",
            model=MODELS[1],
            cycles=30,
            ollama={"host": slow.url},
        )
        proc = cli_start(sqlite_backend, "run", str(going))
        try:
            with served(sqlite_backend) as console, chromium() as browser:
                page: Any = browser.new_page(viewport=VIEW)
                page.goto(console.url)
                row = page.locator('[data-testid="run"][data-run-id="explorer-long"]')
                expect(row.locator(".in-cycle")).to_be_visible(timeout=60_000)
                expect(row.locator('[data-testid="cycle"]')).to_have_text(
                    re.compile(r"^[2-9]/30$"), timeout=60_000
                )
                expect(page.get_by_role("heading", name="By model")).to_be_visible()
                expect(page.locator('[data-testid="run"]')).to_have_count(len(runs) + 4)
                expect(page.locator("tr.failed .reason")).to_contain_text("Ollama")
                shoot(page, folder, "overview")

                page.goto(f"{console.url}runs/{runs[0]}")
                expect(page.locator("details.cycle")).to_have_count(6)
                expect(page.locator('[data-testid="memory"]')).to_be_visible()
                shoot(page, folder, "run")
                page.locator("#cycle-2 > summary").click()  # a cycle with an operator message
                expect(page.locator("#cycle-2 article.operator")).to_be_visible()
                page.locator("#cycle-2 article.operator").scroll_into_view_if_needed()
                shoot(page, folder, "transcript")

                # A run page follows its run: cycles that end join it without a reload.
                # (Its figure, drawn anew as each cycle ends, may lag on a busy machine.)
                page.goto(f"{console.url}runs/explorer-long", wait_until="domcontentloaded")
                page.evaluate("window.__same_page = true")
                shown = page.locator("details.cycle").count()
                cycles = page.locator("details.cycle")
                wait_for(lambda: cycles.count() > shown, 60, "a finished cycle joining the page")
                assert page.evaluate("window.__same_page") is True

                page.goto(f"{console.url}inbox")
                expect(page.locator('[data-testid="operator-message"]')).to_have_count(1)
                page.locator("textarea").fill("Hello! I read your note; carry on exploring.")
                shoot(page, folder, "inbox")

                page.goto(f"{console.url}compare?run={runs[0]}&run=pilot-fork")
                expect(page.locator("td.same").first).to_be_visible()
                shoot(page, folder, "compare")

                page.goto(f"{console.url}results?batch=pilot")
                # The form's answer is the written report: a slow machine takes its time.
                with page.expect_navigation(timeout=120_000):
                    page.get_by_role("button", name="Write the report").click(timeout=120_000)
                expect(page.get_by_role("link", name="report.html")).to_be_visible(timeout=120_000)
                expect(page.locator("table.pei").first).to_be_visible()
                shoot(page, folder, "results")
                page.close()
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    wait_for(lambda: all((folder / f"{n}.png").exists() for n in ("overview", "run")), 5)
