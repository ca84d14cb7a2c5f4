"""docs/notebook.md runs: its Python cells, in order, in one interpreter, on stub batches.

The page reads batches `explore` and `explore-hot` from `./runs`, the storage the CLI uses
without flags; here the bundled stub makes them in a temporary folder, some runs are rated
on the PEI scale, and the cells run there as a script, as a notebook kernel would run them.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from contreact.analysis.pei.evaluation import set_level
from contreact.checkpoints.engines import engine_for
from contreact.checkpoints.registry import get_run
from contreact.stub import StubServer
from support.backends import Backend
from support.batches import run_batch
from support.cli import cli_env
from support.paths import ROOT

PAGE = ROOT / "docs" / "notebook.md"
MODELS = ("llama3.1:8b", "qwen3:8b")


def cells() -> list[str]:
    return re.findall(r"```python\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.S)


def test_the_notebook_page_runs(tmp_path: Path) -> None:
    assert len(cells()) >= 6
    backend = Backend("sqlite", tmp_path / "runs")
    with StubServer(models=list(MODELS)).start() as server:
        explore = run_batch(backend, server, "explore", MODELS)
        run_batch(backend, server, "explore-hot", MODELS, model_options={"temperature": 1.0})
    engine = engine_for(backend.storage())
    for run_id in explore:
        for level, evaluator in enumerate(MODELS, start=5):
            set_level(backend.storage(), get_run(engine, run_id), evaluator, level)

    script = tmp_path / "notebook.py"
    script.write_text("\n".join(cells()), encoding="utf-8")
    env = {k: v for k, v in cli_env().items() if not k.startswith("CONTREACT_")}
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    printed = done.stdout
    for run_id in explore:
        assert run_id in printed
    assert "self-rating mean: 5.5" in printed  # levels 5 (llama) and 6 (qwen), self-rated
    assert "explore-hot" in printed and "send_message_to_operator" in printed
    for name in ("per_cycle", "runs"):
        assert (tmp_path / f"{name}.png").read_bytes().startswith(b"\x89PNG")
        assert (tmp_path / f"{name}.pdf").read_bytes().startswith(b"%PDF")
    assert "Int64" in printed and "datetime64[us, UTC]" in printed  # the typed columns
    assert "likely too narrow" in printed  # 2 replicates: the interval says so
    assert "Response chars" in printed and "(exact; smallest possible" in printed
