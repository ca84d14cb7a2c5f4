"""`contreact report`: files, CSV, Markdown, and the HTML page rendered in headless Chromium.

The Chromium test needs Debian's `chromium` (`apt-get install -y chromium`): it skips
with that reason when the browser is absent, except in CI (`CI=true`), where it fails.
"""

from __future__ import annotations

import base64
import csv
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image
from sqlalchemy import update
from typer.testing import CliRunner

from contreact.analysis.pei.evaluation import evaluate
from contreact.analysis.report import markdown_table
from contreact.checkpoints.engines import engine_for
from contreact.checkpoints.registry import get_run
from contreact.checkpoints.schema import runs
from contreact.cli import app
from contreact.config import parse_config
from contreact.engine.evaluator import ask_evaluator
from contreact.engine.runner import start_run
from contreact.stub import StubServer
from support.backends import Backend
from support.ci import IN_CI
from support.cli import cli_in_process

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
]


@dataclass
class Generated:
    """A report written by the real command, and what it was made from."""

    out: Path
    stdout: str
    backend: Backend
    digests: dict[str, str]
    """Model name -> digest, as the stub's /api/tags lists it (and the runs recorded it)."""


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Generated]:
    """Two runs of a batch, rated by two evaluators, reported with `contreact report`."""
    root = tmp_path_factory.mktemp("report")
    backend = Backend("sqlite", root / "runs")
    storage = backend.storage()
    with StubServer(models=["stub-model", "stub-eval"]).start() as server:
        for run_id, cycles, embed in (("r1", 4, "stub-embed"), ("r2", 3, None)):
            config = parse_config(
                {
                    "run_id": run_id,
                    "model": "stub-model",
                    "cycles": cycles,
                    "ollama": {"host": server.url, "timeout_s": 20, "retries": 2},
                    "similarity": {"embedding_model": embed},
                    "storage": backend.storage_yaml(),
                },
                "test",
            )
            assert start_run(config, storage).status == "completed"
        engine = engine_for(storage)
        with engine.begin() as conn:
            conn.execute(update(runs).where(runs.c.run_id.in_(["r1", "r2"])).values(batch="b"))
        rated = evaluate(
            storage,
            [get_run(engine, r) for r in ("r1", "r2")],
            ["stub-model", "stub-eval"],
            ask=ask_evaluator,
        )
        assert len(rated.results) == 4 and not rated.failures
        out = root / "out"
        # The report asks no host (tests/e2e/test_provenance_e2e.py makes one with it down).
        result = cli_in_process(backend, "report", "--batch", "b", "--out", str(out), timeout=600)
        tags = httpx.get(f"{server.url}/api/tags").json()["models"]
    assert result.returncode == 0, result.stderr + result.stdout
    digests = {m["name"].removesuffix(":latest"): m["digest"] for m in tags}
    yield Generated(out, result.stdout, backend, digests)


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


def test_report_files_exist_and_csv_parses(generated: Generated) -> None:
    out = generated.out
    names = {p.name for p in out.iterdir()}
    assert {
        "report.html",
        "report.md",
        "cycles.csv",
        "table1_runs.csv",
        "table1_models.csv",
        "pei_results.csv",
        "pei_matrix.csv",
        "per_cycle_metrics.png",
        "similarity_r1.png",
        "similarity_r2.png",
        "pei_matrix.png",
    } <= names
    for name in names:
        assert str(out / name) in generated.stdout
    cycles = read_csv(out / "cycles.csv")
    assert [(r["run_id"], int(r["cycle"])) for r in cycles] == [
        ("r1", 1), ("r1", 2), ("r1", 3), ("r1", 4), ("r2", 1), ("r2", 2), ("r2", 3)
    ]  # fmt: skip
    assert all(int(r["memory_ops_total"]) >= 1 and int(r["tokens_out"]) > 0 for r in cycles)
    # The first cycle has nothing to compare with: no similarity, not 0.
    assert cycles[0]["similarity"] == "" and cycles[1]["similarity"] != ""
    assert cycles[1]["similarity_method"] == "embedding:stub-embed"
    assert cycles[5]["similarity_method"] == "lexical-char-tfidf"
    table1 = read_csv(out / "table1_runs.csv")
    assert [r["run_id"] for r in table1] == ["r1", "r2"]
    for row in table1:
        run_cycles = [c for c in cycles if c["run_id"] == row["run_id"]]
        assert int(row["memory_tool_ops"]) == sum(int(c["memory_ops_total"]) for c in run_cycles)
        assert int(row["final_memory_keys"]) == int(run_cycles[-1]["final_memory_keys"])
    models = read_csv(out / "table1_models.csv")
    # A 4-cycle and a 3-cycle run: their totals are not averaged together.
    assert [(m["model"], m["cycles"], m["run_ids"]) for m in models] == [
        ("stub-model", "3", "r2"), ("stub-model", "4", "r1")
    ]  # fmt: skip
    matrix = read_csv(out / "pei_matrix.csv")
    assert [m["history"] for m in matrix] == ["r1", "r2"]
    assert all(1 <= int(m[e]) <= 10 for m in matrix for e in ("stub-model", "stub-eval"))
    for png in out.glob("*.png"):
        assert png.read_bytes().startswith(PNG_MAGIC)
        with Image.open(png) as image:
            assert image.width > 100 and image.height > 100

    markdown = (out / "report.md").read_text(encoding="utf-8")
    for heading in ("## Table 1 by model", "## Table 1 by run", "## PEI ratings", "## Per-cycle"):
        assert heading in markdown
    assert "| Memory tool ops |" in markdown and "ICC(A,1)" in markdown
    assert "](per_cycle_metrics.png)\n\n" in markdown and "[PDF](per_cycle_metrics.pdf)" in markdown


class _Page(HTMLParser):
    """Counts what a page is made of (tags, image sources, resource references)."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: dict[str, int] = {}
        self.images: list[str] = []
        self.references: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags[tag] = self.tags.get(tag, 0) + 1
        values = dict(attrs)
        if tag == "img":
            self.images.append(values.get("src") or "")
        for name in ("src", "href"):
            if values.get(name):
                self.references.append(str(values[name]))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


class _Rows(HTMLParser):
    """The cell texts of every table row (th and td), in order."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self.cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self.cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self.cell is not None:
            self.rows[-1].append("".join(self.cell).strip())
            self.cell = None

    def handle_data(self, data: str) -> None:
        if self.cell is not None:
            self.cell.append(data)


def table_rows(html: str) -> list[list[str]]:
    parser = _Rows()
    parser.feed(html)
    return parser.rows


def parse(html: str) -> _Page:
    page = _Page()
    page.feed(html)
    return page


def test_html_is_self_contained(generated: Generated) -> None:
    html = (generated.out / "report.html").read_text(encoding="utf-8")
    page = parse(html)
    assert page.tags.get("script", 0) == 0 and page.tags.get("link", 0) == 0
    assert all(ref.startswith("data:image/png;base64,") for ref in page.references)
    pngs = sorted(generated.out.glob("*.png"))
    assert len(page.images) == len(pngs)
    embedded = sorted(base64.b64decode(src.split(",", 1)[1]) for src in page.images)
    assert embedded == sorted(p.read_bytes() for p in pngs)
    assert page.tags["table"] >= 6
    assert not re.search(r"url\(\s*['\"]?(?!data:)", html), "CSS must not load anything"


def test_report_bad_input(generated: Generated) -> None:
    for args, words in (
        (["report", "nope"], "no run named nope"),
        (["report"], "name at least one run"),
        (["report", "--batch", "zzz"], "no runs belong to batch 'zzz'"),
    ):
        result = CliRunner().invoke(app, [*generated.backend.cli_args, *args])
        assert result.exit_code == 2 and words in result.stderr, (args, result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1


def test_markdown_table_escapes_cells() -> None:
    table = markdown_table(["a|b", "c"], [["x|y", "line\nbreak"]])
    assert table.splitlines() == ["| a\\|b | c |", "|---|---|", "| x\\|y | line break |"]


# ---------------------------------------------------------------------------- Chromium


def chromium() -> str:
    """The Chromium binary, or skip (fail in CI) naming the package to install."""
    found = shutil.which("chromium") or (
        "/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None
    )
    if found:
        return found
    message = "headless Chromium is needed for the HTML report test: apt-get install -y chromium"
    if IN_CI:
        pytest.fail(f"{message} (CI=true, so this is an error, not a skip)")
    pytest.skip(f"chromium not installed; {message}")


def browse(tmp: Path, page: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """Open `page` in a fresh headless Chromium profile with console logging to stderr."""
    profile = tmp / f"profile-{len(list(tmp.glob('profile-*')))}"
    return subprocess.run(
        [
            chromium(),
            *CHROMIUM_FLAGS,
            f"--user-data-dir={profile}",
            "--enable-logging=stderr",
            "--v=0",
            *extra,
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=90,
        stdin=subprocess.DEVNULL,
    )


def console_lines(stderr: str) -> list[str]:
    """Console messages and uncaught errors Chromium logged (any level)."""
    return [line for line in stderr.splitlines() if ":CONSOLE" in line or "Uncaught" in line]


PROBE = """<script>
window.addEventListener("load", () => {
  const widths = Array.from(document.images, (img) => img.complete ? img.naturalWidth : -1);
  document.body.setAttribute("data-probe", JSON.stringify({
    widths, tables: document.querySelectorAll("table").length,
    rows: document.querySelectorAll("tbody tr").length }));
  console.log("probe-sentinel");
});
</script></body>"""


def test_html_report_renders_in_headless_chromium(generated: Generated, tmp_path: Path) -> None:
    chromium()
    report = generated.out / "report.html"
    pngs = len(list(generated.out.glob("*.png")))

    # The DOM after load has the tables and the images, and nothing hit the console.
    dom = browse(tmp_path, report, "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    page = parse(dom.stdout)
    assert page.tags.get("table", 0) >= 6 and page.tags.get("tr", 0) >= 20
    assert len(page.images) == pngs and all(s.startswith("data:image/png") for s in page.images)
    text = " ".join(page.text)
    assert "Table 1 by model" in text and "PEI ratings" in text and "r2" in text
    assert console_lines(dom.stderr) == [], console_lines(dom.stderr)

    # The rendered methods block lists, for every run, its seed, temperature,
    # num_ctx and model digest (the digest the runs' host listed as they ran).
    section = re.search(r'<section id="methods">(.*?)</section>', dom.stdout, re.S)
    assert section, "no methods block in the rendered page"
    table = re.search(r'<table class="wide methods">.*?</table>', section.group(1), re.S)
    assert table, "no methods table in the methods block"
    rows = table_rows(table.group(0))
    header, body = rows[0], rows[1:]
    by_run = {row[0]: dict(zip(header, row, strict=True)) for row in body}
    assert set(by_run) == {"r1", "r2"}
    for run_id, row in by_run.items():
        config = get_run(engine_for(generated.backend.storage()), run_id).config
        options = config["model_options"]
        assert row["Seed"] == str(options["seed"]) == "42"
        assert row["Temperature"] == str(options["temperature"])
        assert row["num_ctx"] == str(options["num_ctx"])
        # A digest shows its first digits; the whole value is the cell's title.
        digest = generated.digests["stub-model"]
        assert row["Model digest"] == digest[: len("stub:") + 12] + "…" and len(digest) > 40
        assert f'title="{digest}"' in table.group(0)
    assert "Szeider (2025) Box 1 word for word" in section.group(1)

    # A screenshot of the page is a real picture, not a blank canvas.
    shot = tmp_path / "report.png"
    taken = browse(tmp_path, report, f"--screenshot={shot}", "--window-size=1280,2400")
    assert taken.returncode == 0 and shot.exists(), taken.stderr[-2000:]
    assert shot.read_bytes().startswith(PNG_MAGIC)
    with Image.open(shot) as image:
        assert image.size == (1280, 2400)
        colours = image.convert("RGB").getcolors(maxcolors=1 << 20)
    assert colours is not None and len(colours) > 50, "the screenshot is blank"
    assert max(count for count, _ in colours) < 0.98 * 1280 * 2400

    # Every image decodes: a copy of the page with a probe script reports each image's
    # natural width. The probe also logs to the console, which proves the console check
    # above would have caught a message.
    probed = tmp_path / "probed.html"
    probed.write_text(
        report.read_text(encoding="utf-8").replace("</body>", PROBE), encoding="utf-8"
    )
    probe = browse(tmp_path, probed, "--dump-dom")
    found = re.search(r'data-probe="([^"]*)"', probe.stdout)
    assert found, probe.stdout[-2000:]
    result: dict[str, Any] = __import__("json").loads(found.group(1).replace("&quot;", '"'))
    assert len(result["widths"]) == pngs and all(w > 100 for w in result["widths"]), result
    assert result["tables"] >= 6 and result["rows"] >= 15
    assert any("probe-sentinel" in line for line in console_lines(probe.stderr))
