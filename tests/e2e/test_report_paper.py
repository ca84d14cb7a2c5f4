"""A report a paper can take: intervals, comparisons, LaTeX, figures, and a page that fits.

Two batches that differ only in temperature (`a` at the default 0.6, `a-hot` at 1.0), two
models × three replicates × three cycles each; batch `a` rated by two evaluators, each
asked twice (`pei --repeat 2`). `report --batch a --batch a-hot` is checked against
independent computations: scipy's bootstrap on the per-run values of `table1_runs.csv`
with the report's seed, and scipy's permutation test on the paired differences. The page
is opened in headless Chromium (Playwright) at 1,400 px and as print: nothing overflows.
"""

from __future__ import annotations

import csv
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from scipy import stats

from contreact.analysis.intervals import RESAMPLES, SEED
from contreact.analysis.metrics import TABLE1_KEYS
from contreact.stub import StubServer
from support.backends import Backend
from support.batches import run_batch
from support.ci import IN_CI
from support.cli import cli_env, cli_in_process
from support.paths import ROOT

MODELS = ("stub-a", "stub-b")


@dataclass
class Made:
    backend: Backend
    out: Path
    stdout: str


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Made]:
    root = tmp_path_factory.mktemp("paper")
    backend = Backend("sqlite", root / "runs")
    with StubServer(models=list(MODELS)).start() as server:
        run_batch(backend, server, "a", MODELS, replicates=3, cycles=3)
        run_batch(
            backend, server, "a-hot", MODELS, replicates=3, cycles=3,
            model_options={"temperature": 1.0},
        )  # fmt: skip
        rated = cli_in_process(
            backend, "pei", "--batch", "a", "-e", MODELS[0], "-e", MODELS[1], "--repeat", "2"
        )
        assert rated.returncode == 0, rated.stderr
    out = root / "report"
    # A report draws a dozen figures in three formats: minutes when the machine is busy.
    args = ("report", "--batch", "a", "--batch", "a-hot", "--out", str(out))
    done = cli_in_process(backend, *args, timeout=600)
    assert done.returncode == 0, done.stderr
    yield Made(backend, out, done.stdout)


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


def test_table1_intervals_are_scipys_bootstrap_of_the_runs(made: Made) -> None:
    runs = read_csv(made.out / "table1_runs.csv")
    models = read_csv(made.out / "table1_models.csv")
    assert [(m["batch"], m["model"], m["runs"]) for m in models] == [
        ("a", "stub-a", "3"), ("a", "stub-b", "3"),
        ("a-hot", "stub-a", "3"), ("a-hot", "stub-b", "3"),
    ]  # fmt: skip
    for m in models:
        assert m["interval_method"] == "percentile bootstrap"
        for key in TABLE1_KEYS:
            values = [
                float(r[key]) for r in runs if (r["batch"], r["model"]) == (m["batch"], m["model"])
            ]
            assert float(m[f"{key}_mean"]) == pytest.approx(np.mean(values), abs=1e-4)
            if np.ptp(values) == 0:  # every run alike: an interval of no width
                assert float(m[f"{key}_ci_low"]) == float(m[f"{key}_ci_high"]) == values[0]
                continue
            expected = stats.bootstrap(
                (np.array(values),),
                np.mean,
                n_resamples=RESAMPLES,
                method="percentile",  # 3 runs: fewer than 5
                rng=np.random.default_rng(SEED),
            ).confidence_interval
            assert float(m[f"{key}_ci_low"]) == pytest.approx(expected.low, abs=1e-4), key
            assert float(m[f"{key}_ci_high"]) == pytest.approx(expected.high, abs=1e-4), key
    markdown = (made.out / "report.md").read_text(encoding="utf-8")
    assert "## Table 1 by model (mean [95 % interval] over runs)" in markdown
    assert "† Fewer than 5 runs (n = 3)" in markdown
    assert f"seed {SEED}" in markdown and "scipy.stats.bootstrap" in markdown


def test_the_temperature_comparison_is_paired_and_its_test_exact(made: Made) -> None:
    runs = {r["run_id"]: r for r in read_csv(made.out / "table1_runs.csv")}
    rows = read_csv(made.out / "comparison_a-hot_vs_a.csv")
    overall = {r["metric"]: r for r in rows if r["scope"] == "all models"}
    assert set(overall) == set(TABLE1_KEYS)
    key = "reflection_chars"
    pairs = {
        model: [
            float(runs[f"a-hot.{model}.r{n}"][key]) - float(runs[f"a.{model}.r{n}"][key])
            for n in (1, 2, 3)
        ]
        for model in MODELS
    }
    row = overall[key]
    assert int(row["pairs"]) == 6 and row["p_exact"] == "True"
    assert float(row["difference"]) == pytest.approx(np.mean([np.mean(d) for d in pairs.values()]))
    d = np.array(pairs[MODELS[0]] + pairs[MODELS[1]])
    expected = stats.permutation_test(
        (d,), np.mean, permutation_type="samples", n_resamples=RESAMPLES, vectorized=True
    ).pvalue  # equal weights: 3 pairs a model
    assert float(row["p_value"]) == pytest.approx(expected)
    assert float(row["smallest_p"]) == pytest.approx(2 / 2**6)
    # One row per model follows, on its own three pairs.
    (first,) = [r for r in rows if r["metric"] == key and r["scope"] == MODELS[0]]
    assert float(first["difference"]) == pytest.approx(np.mean(pairs[MODELS[0]]))
    assert float(first["smallest_p"]) == pytest.approx(0.25)
    models = read_csv(made.out / "comparison_models.csv")
    assert {(r["scope"], r["a"], r["b"]) for r in models} == {("a", *MODELS), ("a-hot", *MODELS)}


def test_latex_tables_are_written_and_compile(made: Made, tmp_path: Path) -> None:
    for stem in ("table1_models", "comparison_a-hot_vs_a", "comparison_models", "pei_matrix"):
        text = (made.out / f"{stem}.tex").read_text(encoding="utf-8")
        assert "\\toprule" in text and "\\bottomrule" in text and f"tab:{stem}" in text
    pdflatex = shutil.which("pdflatex")
    if pdflatex is None:
        message = (
            "pdflatex is needed: apt-get install -y texlive-latex-base texlive-latex-recommended"
        )
        if IN_CI:
            pytest.fail(f"{message} (CI=true, so this is an error, not a skip)")
        pytest.skip(message)
    shutil.copy(made.out / "tables.tex", tmp_path / "tables.tex")
    done = subprocess.run(
        [pdflatex, "-interaction=nonstopmode", "-halt-on-error", "tables.tex"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:]
    assert (tmp_path / "tables.pdf").read_bytes().startswith(b"%PDF")


def test_every_figure_in_three_formats(made: Made) -> None:
    stems = {p.stem for p in made.out.glob("*.png")}
    assert {"per_cycle_metrics", "per_cycle_runs", "pei_matrix", "pei_model_matrix"} <= stems
    for stem in stems:
        assert (made.out / f"{stem}.pdf").read_bytes().startswith(b"%PDF")
        assert b"<svg" in (made.out / f"{stem}.svg").read_bytes()[:1000]
        with Image.open(made.out / f"{stem}.png") as png:
            assert png.info["dpi"] == pytest.approx((300, 300), abs=1)
        assert str(made.out / f"{stem}.pdf") in made.stdout


def test_pei_repeats_give_each_evaluator_a_test_retest_figure(made: Made) -> None:
    results = read_csv(made.out / "pei_results.csv")
    assert {r["repeat"] for r in results} == {"1"}  # the matrix holds repeat 1
    retest = read_csv(made.out / "pei_test_retest.csv")
    assert {(r["evaluator"], r["repeats"], r["statistic"]) for r in retest} == {
        (e, "2", s) for e in MODELS for s in ("ICC(A,1)", "Krippendorff's alpha")
    }
    markdown = (made.out / "report.md").read_text(encoding="utf-8")
    assert "### PEI test-retest" in markdown and "asked 2 times: test-retest ICC(A,1)" in markdown
    agreement = read_csv(made.out / "pei_agreement.csv")
    assert [a["statistic"] for a in agreement] == [
        "ICC(A,1)",
        "Kendall's W",
        "Krippendorff's alpha",
    ]


# ------------------------------------------------------------------ the page, in Chromium

PROBE = """() => {
  const width = document.documentElement.clientWidth;
  const out = [];
  for (const el of document.body.querySelectorAll("*")) {
    if (el.closest(".scroll") && !el.classList.contains("scroll")) continue;
    const box = el.getBoundingClientRect();
    if (box.width && box.right > width + 1) out.push(el.tagName + "." + el.className);
  }
  return {scroll: document.documentElement.scrollWidth, width, out,
          boxes: document.querySelectorAll(".scroll").length,
          tables: document.querySelectorAll("table").length,
          titled: document.querySelectorAll("span.hash[title]").length};
}"""


def browser_path() -> str:
    found = shutil.which("chromium") or (
        "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None
    )
    if found:
        return found
    message = "headless Chromium is needed for the HTML report test: apt-get install -y chromium"
    if IN_CI:
        pytest.fail(f"{message} (CI=true, so this is an error, not a skip)")
    pytest.skip(f"chromium not installed; {message}")


def test_the_page_never_overflows_at_1400_px_and_prints_within_the_page(
    made: Made, tmp_path: Path
) -> None:
    # Playwright runs in its own process: its event loop never meets the test's.
    script = tmp_path / "probe.py"
    script.write_text(
        f"""
import json, sys
from playwright.sync_api import sync_playwright
with sync_playwright() as p:
    browser = p.chromium.launch(executable_path={browser_path()!r}, args=["--no-sandbox"])
    page = browser.new_page(viewport={{"width": 1400, "height": 900}})
    page.goto({(made.out / "report.html").as_uri()!r})
    screen = page.evaluate({PROBE!r})
    page.emulate_media(media="print")
    page.set_viewport_size({{"width": 688, "height": 1000}})  # A4 less 14 mm margins
    printed = page.evaluate({PROBE!r})
    page.pdf(path={str(tmp_path / "report.pdf")!r}, format="A4")
    browser.close()
print(json.dumps({{"screen": screen, "print": printed}}))
""",
        encoding="utf-8",
    )
    done = subprocess.run(
        [sys.executable, str(script)], cwd=ROOT, env=cli_env(), capture_output=True,
        text=True, timeout=180, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    found = __import__("json").loads(done.stdout.strip().splitlines()[-1])
    screen, printed = found["screen"], found["print"]
    assert screen["scroll"] <= 1400 and screen["out"] == [], screen
    assert screen["boxes"] == screen["tables"] >= 10  # every table in a box of its own
    assert screen["titled"] >= 12  # hashes shortened, each whole in its title
    assert printed["scroll"] <= printed["width"] and printed["out"] == [], printed
    assert (tmp_path / "report.pdf").read_bytes().startswith(b"%PDF")


def test_each_repeat_is_stored_with_its_own_seed(made: Made) -> None:
    import json

    import contreact

    pei = contreact.load(batch="a", storage=made.backend.data_dir).pei
    assert sorted(set(pei.repeat)) == [1, 2] and len(pei) == 6 * 2 * 2
    seeds = {(r.repeat, json.loads(r.options)["seed"]) for r in pei.itertuples()}
    assert seeds == {(1, 42), (2, 43)}  # pei.seed, then pei.seed + 1
    again = cli_in_process(made.backend, "pei", "--batch", "a", "-e", MODELS[0], "--repeat", "2")
    assert again.returncode == 0 and again.stdout.count("(stored earlier)") == 12
    assert again.stdout.count("(repeat 2) (stored earlier)") == 6
