"""Every benchmark script is run by `benchmarks/run_all.py` or named there as left out, with why.

The scripts live in folders named for their kind (cost, robustness, capture, reports); the
shared helpers (`common.py`, ...) stay in `benchmarks/` itself. A script added to a folder
and forgotten in run_all would never be run by anyone: this names it. Read from the file
(no benchmark is imported or run here).
"""

from __future__ import annotations

import ast

from support.paths import ROOT

BENCHMARKS = ROOT / "benchmarks"


def run_all_lists() -> tuple[list[str], dict[str, str]]:
    """run_all's BENCHMARKS paths and LEFT_OUT reasons, as written."""
    tree = ast.parse((BENCHMARKS / "run_all.py").read_text(encoding="utf-8"))
    found: dict[str, object] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            if node.targets[0].id in ("BENCHMARKS", "LEFT_OUT"):
                found[node.targets[0].id] = ast.literal_eval(node.value)
    listed = found["BENCHMARKS"]
    left_out = found["LEFT_OUT"]
    assert isinstance(listed, list) and isinstance(left_out, dict)
    return [path for path, _ in listed], left_out


def test_run_all_runs_every_script_or_says_why_it_leaves_one_out() -> None:
    run, left_out = run_all_lists()
    scripts = sorted(p.relative_to(BENCHMARKS).as_posix() for p in BENCHMARKS.glob("*/*.py"))
    assert len(scripts) >= 20, scripts
    assert sorted([*run, *left_out]) == scripts
    assert all(len(why) > 20 for why in left_out.values()), left_out


def test_scripts_are_grouped_by_kind_and_only_helpers_stay_at_the_top() -> None:
    kinds = {p.name for p in BENCHMARKS.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert kinds == {"cost", "robustness", "capture", "reports"}
    top = {p.name for p in BENCHMARKS.glob("*.py")}
    assert top == {"common.py", "outcomes.py", "run_all.py", "sampling.py", "timers.py"}
