"""Trying it without a model: the stub serves a config's models, or answers from a script.

docs/commands.md's "Trying it without a model" is run as written: `contreact stub --scenario
examples/stub-scenario.yaml` (on a free port, named by OLLAMA_HOST) and `contreact run
examples/custom-tool.yaml`, whose tool lives in a module beside the config. `doctor CONFIG`
loads a config's tools and hooks and fails, in one line with a "did you mean", on one that
cannot load.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from support.backends import Backend
from support.cli import cli_env, cli_in_process
from support.paths import ROOT


def documented_commands() -> list[str]:
    docs = (ROOT / "docs" / "commands.md").read_text(encoding="utf-8")
    section = docs.split("## Trying it without a model", 1)[1].split("\n## ", 1)[0]
    block = re.findall(r"```bash\n(.*?)```", section, re.S)[0]
    return [line.strip() for line in block.splitlines() if line.strip()]


def test_the_docs_show_the_scenario_file_word_for_word() -> None:
    docs = (ROOT / "docs" / "commands.md").read_text(encoding="utf-8")
    section = docs.split("## Trying it without a model", 1)[1].split("\n## ", 1)[0]
    scenario = (ROOT / "examples" / "stub-scenario.yaml").read_text(encoding="utf-8")
    body = "".join(line + "\n" for line in scenario.splitlines() if not line.startswith("#"))
    assert body in re.findall(r"```yaml\n(.*?)```", section, re.S)


def test_a_scenario_scripts_a_call_of_your_own_tool(tmp_path: Path) -> None:
    serve, run = documented_commands()
    assert serve == "contreact stub --scenario examples/stub-scenario.yaml"
    assert run == "contreact run examples/custom-tool.yaml"
    # A newcomer's folder: the examples, and no PYTHONPATH naming them.
    for name in ("stub-scenario.yaml", "custom-tool.yaml", "word_tools.py"):
        (tmp_path / "examples").mkdir(exist_ok=True)
        shutil.copy(ROOT / "examples" / name, tmp_path / "examples" / name)
    env = {k: v for k, v in cli_env().items() if not k.startswith(("CONTREACT_", "OLLAMA_"))}
    env["PYTHONPATH"] = str(ROOT)
    contreact = [sys.executable, "-m", "contreact"]
    stub = subprocess.Popen(
        [*contreact, *shlex.split(serve)[1:], "--port", "0"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert stub.stdout is not None
        ready = [stub.stdout.readline(), stub.stdout.readline()][-1]
        assert ready.startswith("STUB READY "), ready
        done = subprocess.run(
            [*contreact, *shlex.split(run)[1:]],
            cwd=tmp_path,
            env={**env, "OLLAMA_HOST": ready.split()[-1]},
            capture_output=True,
            text=True,
            timeout=300,
            stdin=subprocess.DEVNULL,
        )
    finally:
        stub.terminate()
        assert stub.wait(timeout=30) == 0
    assert done.returncode == 0, done.stdout + done.stderr
    assert "  count_words → 4\n" in done.stdout
    assert "cycle 1 reflection: My own tool says the sentence has four words." in done.stdout
    assert "cycle 2 reflection: I wrote the count down." in done.stdout


def test_models_of_a_config_that_names_none_is_one_line(tmp_path: Path) -> None:
    empty = tmp_path / "empty.yaml"
    empty.write_text("cycles: 3\n", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "contreact", "stub", "--models-of", str(empty), "--port", "0"],
        env={
            **cli_env(),
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        },  # noqa: E501
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr == f"contreact: {empty} names no model (neither `model` nor `models`)\n"


PROBE = '''
def probe(text: str) -> str:
    """Echo the text.

    Args:
        text: What to echo.
    """
    return text
'''


def test_doctor_loads_the_configs_tools_and_fails_on_one_that_cannot_load(
    tmp_path: Path, sqlite_backend: Backend
) -> None:
    from contreact.stub import StubServer

    package = tmp_path / "advt"
    package.mkdir()
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "raises.py").write_text(PROBE, encoding="utf-8")
    (package / "guards.py").write_text(
        "class Guard:\n    def on_cycle_end(self, info):\n        pass\n", encoding="utf-8"
    )
    with StubServer().start() as server:

        def doctor(tool: str, hook: str | None = None) -> subprocess.CompletedProcess[str]:
            config = tmp_path / "run.yaml"
            hooks = f"hooks: ['{hook}']\n" if hook else ""
            config.write_text(
                f"run_id: d\nmodel: stub-model\nollama: {{host: '{server.url}'}}\n"
                f"tools: {{add: ['{tool}'], entry_points: false}}\n{hooks}",
                encoding="utf-8",
            )
            return cli_in_process(sqlite_backend, "doctor", str(config))

        fine = doctor("advt.raises:probe")
        misspelt = doctor("advt.raises:prbe")
        no_module = doctor("advt.raisez:probe")
        needs_self = doctor("advt.raises:probe", "advt.guards:Guard")
    assert fine.returncode == 0, fine.stdout
    assert "extensions tools probe load" in fine.stdout
    assert misspelt.returncode == 1
    assert (
        "FAIL extensions tool advt.raises:prbe cannot be loaded: advt.raises has no prbe "
        "(did you mean probe?)"
    ) in misspelt.stdout
    assert no_module.returncode == 1
    assert "there is no module advt.raisez (did you mean advt.raises?)" in no_module.stdout
    assert needs_self.returncode == 1
    assert (
        "FAIL extensions hook advt.guards:Guard is a class whose on_cycle_end take `self`"
    ) in needs_self.stdout
