"""LaTeX tables: booktabs, every special character escaped, wide tables scaled to the line."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from contreact.analysis.latex import escape, label_of, standalone, table
from support.ci import IN_CI


def test_special_characters_in_model_names_are_escaped() -> None:
    assert escape("qwen3:8b_q4&k 100% #1 $x {a} ~ ^ \\") == (
        "qwen3:8b\\_q4\\&k 100\\% \\#1 \\$x \\{a\\} \\textasciitilde{} "
        "\\textasciicircum{} \\textbackslash{}"
    )
    assert escape("a − b ± c × d † · –") == (
        "a \\textminus{} b \\textpm{} c \\texttimes{} d \\textdagger{} \\textperiodcentered{} --"
    )
    assert escape("line\nbreak\x1b[31m") == "line break[31m"
    assert label_of("comparison_b-hot_vs_b") == "tab:comparison_b-hot_vs_b"


def test_a_table_is_booktabs_and_a_wide_one_fits_the_line() -> None:
    narrow = table(["Metric", "m"], [["x_y", "1 [0, 2]†"]], caption="C & D", label="tab:x")
    assert "\\toprule" in narrow and "\\midrule" in narrow and "\\bottomrule" in narrow
    assert "\\caption{C \\& D}" in narrow and "x\\_y & 1 [0, 2]\\textdagger{} \\\\" in narrow
    assert "resizebox" not in narrow
    wide = table([f"h{i}" for i in range(9)], [["1"] * 9], caption="w", label="tab:w")
    assert "\\resizebox{\\linewidth}{!}{%" in wide and "\\end{tabular}}" in wide


def test_the_tables_compile_with_pdflatex(tmp_path: Path) -> None:
    pdflatex = shutil.which("pdflatex")
    if pdflatex is None:
        message = (
            "pdflatex is needed: apt-get install -y texlive-latex-base texlive-latex-recommended"
        )
        if IN_CI:
            pytest.fail(f"{message} (CI=true, so this is an error, not a skip)")
        pytest.skip(message)
    names = ["Metric", "llama3.1:8b_q4&k (n=3)", "50% · hot", *(f"m{i}" for i in range(6))]
    body = [["Reflection chars (k)", "1.22 [1.20, 1.26]†", "−0.5", *("x" for _ in range(6))]]
    document = standalone([table(names, body, caption="Table #1 ~ 100%", label="tab:t")])
    (tmp_path / "t.tex").write_text(document, encoding="utf-8")
    done = subprocess.run(
        [pdflatex, "-interaction=nonstopmode", "-halt-on-error", "t.tex"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:]
    assert "Overfull" not in done.stdout
