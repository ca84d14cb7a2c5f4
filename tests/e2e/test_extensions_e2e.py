"""Your own tools and hooks, installed as a package, through kill -9 and resume.

The example package `examples/contreact-extras` is pip-installed (into a folder the CLI
process gets on its PYTHONPATH, so its `contreact.tools` entry points are found as for any
installed package) and run against the scripted stub. Its tools count their own
executions in a file, with the idempotency key each was given.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from support.backends import Backend
from support.cli import cli
from support.paths import ROOT
from support.runs import outcome, read_log, write_config
from support.stub import scripted_stub


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


SCRIPT = {
    1: [
        call("write", key="plan", value="roll dice"),
        call("dice", sides=20),
        call("clock"),
        call("delete", key="plan"),  # vetoed: cycles 1-2
        "Reflection 1.",
    ],
    2: [call("dice", sides=6), "Reflection 2."],
    3: [call("delete", key="plan"), "Reflection 3."],  # allowed from cycle 3
}


@pytest.fixture(scope="module")
def extras_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example package, installed into a folder of its own (the test venv stays as it is)."""
    work = tmp_path_factory.mktemp("extras")
    source = work / "src"
    shutil.copytree(ROOT / "examples" / "contreact-extras", source)
    site = work / "site"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
         "--no-index", "--target", str(site), str(source)],
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return site


def executions(path: Path) -> list[tuple[str, str]]:
    """(tool, key) of every time a tool of the package really ran."""
    if not path.exists():
        return []
    return [tuple(line.split(" ", 1)) for line in path.read_text().splitlines()]  # type: ignore[misc]


def test_installed_tools_and_hook_run_once_per_recorded_call_across_kill_and_resume(
    tmp_path: Path, sqlite_backend: Backend, extras_site: Path
) -> None:
    counted = tmp_path / "executions.txt"
    env = {"PYTHONPATH": str(extras_site), "CONTREACT_EXTRAS_COUNT_FILE": str(counted)}
    with scripted_stub(SCRIPT) as server:
        config = write_config(
            tmp_path / "c.yaml",
            sqlite_backend,
            run_id="extras",
            cycles=3,
            ollama={"host": server.url},
            hooks=["contreact_extras:guard"],
        )
        # Killed inside the dice call's transaction: the tool ran, its result is not recorded.
        killed = cli(
            sqlite_backend, "run", str(config),
            env={**env, "CONTREACT_FAILPOINTS": "before-commit:c1:s1:t0"},
        )  # fmt: skip
        assert killed.returncode == -9, killed.stderr
        assert ("dice", "extras:c1:s1:t0") in executions(counted)
        finished = cli(sqlite_backend, "resume", "extras", env=env)
    assert finished.returncode == 0, finished.stderr

    log = read_log(sqlite_backend, "extras")
    [record] = [e["payload"] for e in log if e["event_type"] == "EXTENSIONS"]
    tools = {t["name"]: t for t in record["tools"]}
    assert set(tools) == {"clock", "dice"}
    assert tools["dice"]["distribution"] == "contreact-extras"
    assert tools["dice"]["version"] == "0.1.0" and tools["dice"]["effect"] == "effectful"
    assert tools["clock"]["import_path"] == "contreact_extras:clock"
    assert len(tools["clock"]["source_sha256"]) == 64
    [hook] = record["hooks"]
    assert hook["import_path"] == "contreact_extras:guard"
    assert hook["points"] == ["before_tool_call"]

    calls = [e for e in log if e["event_type"] == "TOOL_CALL"]
    recorded = [
        (c["payload"]["tool_name"], f"extras:c{c['cycle_number']}:s{c['payload']['step']}:t0")
        for c in calls
        if c["payload"]["tool_name"] in ("clock", "dice")
    ]
    ran = [(name, key) for name, key in executions(counted) if name != "guard"]
    # Once per recorded call, plus the one in flight at the kill, which carried the same key.
    assert Counter(ran) - Counter(recorded) == Counter({("dice", "extras:c1:s1:t0"): 1})
    assert Counter(recorded) - Counter(ran) == Counter()
    # The hook ran inside each call's journaled step: once per recorded call (a replayed
    # call does not call it again), plus the call in flight at the kill.
    seen = [key for name, key in executions(counted) if name == "guard"]
    every = [f"extras:c{c['cycle_number']}:s{c['payload']['step']}:t0" for c in calls]
    assert Counter(seen) == Counter(every) + Counter(["extras:c1:s1:t0"])
    dice = [c["payload"]["output"] for c in calls if c["payload"]["tool_name"] == "dice"]
    assert dice[0].endswith("on a 20-sided die.") and dice[1].endswith("on a 6-sided die.")

    # The hook vetoed `delete` in cycle 1, the model was told, the memory stayed; cycle 3 ran it.
    deletes = [c for c in calls if c["payload"]["tool_name"] == "delete"]
    assert [c["cycle_number"] for c in deletes] == [1, 3]
    assert "vetoed" in deletes[0]["payload"]["output"] and deletes[0]["payload"]["error"]
    assert deletes[1]["payload"]["output"] == "Deleted memory 'plan'."
    [veto] = [e["payload"] for e in log if e["event_type"] == "HOOK"]
    assert veto["action"] == "veto" and veto["hook"] == "contreact_extras:guard"
    assert veto["tool_name"] == "delete" and veto["parameters"] == {"key": "plan"}


FLAKY_HOOK = """
import os
from pathlib import Path

HERE = Path(__file__).parent


class Guard:
    def before_tool_call(self, call):
        with open(HERE / "calls.txt", "a") as fh:
            fh.write(call["key"] + "\\n")
        if call["key"].endswith(":c2:s1:t0") and (HERE / "broken").exists():
            raise RuntimeError("guard misconfigured")
        return None

    def on_cycle_end(self, info):
        with open(HERE / "cycles.txt", "a") as fh:
            fh.write(f"{info['cycle']}\\n")


guard = Guard()
"""


def test_a_hook_that_raises_fails_the_run_in_one_line_and_resume_completes_after_the_fix(
    tmp_path: Path, sqlite_backend: Backend
) -> None:
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "flaky_hook.py").write_text(FLAKY_HOOK)
    env = {"PYTHONPATH": str(hooks)}
    script = {c: [call("write", key=f"k{c}", value="v"), f"Reflection {c}."] for c in (1, 2, 3)}
    # The hook fails the second call of cycle 2: the first, recorded, is replayed on resume.
    script[2].insert(1, call("write", key="k2b", value="v"))
    with scripted_stub(script) as server:
        common: dict[str, Any] = {
            "cycles": 3,
            "ollama": {"host": server.url},
            "hooks": ["flaky_hook:guard"],
            "tools": {"entry_points": False},
        }
        reference = write_config(tmp_path / "ref.yaml", sqlite_backend, run_id="ref", **common)
        assert cli(sqlite_backend, "run", str(reference), env=env).returncode == 0
        reference_calls = (hooks / "calls.txt").read_text().splitlines()
        (hooks / "calls.txt").unlink()
        (hooks / "cycles.txt").unlink()

        (hooks / "broken").touch()
        config = write_config(tmp_path / "c.yaml", sqlite_backend, run_id="hooked", **common)
        failed = cli(sqlite_backend, "run", str(config), env=env)
        assert failed.returncode == 1
        assert failed.stderr.splitlines() == [
            "contreact: run hooked failed: hook flaky_hook:guard before_tool_call failed: "
            "guard misconfigured (cycle 2); once that is fixed, `contreact resume hooked "
            f"--storage {sqlite_backend.data_dir}` continues it"
        ]
        status = cli(sqlite_backend, "status", "hooked", "--json", env=env)
        assert '"status": "failed"' in status.stdout

        (hooks / "broken").unlink()  # the fix
        resumed = cli(sqlite_backend, "resume", "hooked", env=env)
    assert resumed.returncode == 0, resumed.stderr
    # Same reflections, memory and events as the run whose hook never raised: none twice.
    assert outcome(sqlite_backend, "hooked") == outcome(sqlite_backend, "ref")
    # The hook ran once per call (not again for the recorded call the resume replayed), and
    # again only for the call whose step it failed.
    calls = (hooks / "calls.txt").read_text().splitlines()
    assert sorted(calls) == sorted(
        [c.replace("ref:", "hooked:") for c in reference_calls] + ["hooked:c2:s1:t0"]
    )
    assert (hooks / "cycles.txt").read_text().split() == ["1", "2", "3"]


GUARDS = """
from contreact.extensions.hooks import Rewrite


class Rename:
    def before_tool_call(self, call):
        if call["name"] == "write":
            return Rewrite({**call["args"], "key": "guarded-" + call["args"]["key"]})
        return None


class Oversize:
    def before_tool_call(self, call):
        if call["name"] == "write":
            return {"args": {**call["args"], "value": "x" * 100}}
        return None


class Mistaken:
    def before_tool_call(self, call):
        return "veto please"


rename, oversize, mistaken = Rename(), Oversize(), Mistaken()
"""


def test_tool_call_records_the_arguments_that_ran_and_a_rewrite_s_failure_names_the_hook(
    tmp_path: Path, sqlite_backend: Backend
) -> None:
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "guards.py").write_text(GUARDS)
    env = {"PYTHONPATH": str(hooks)}
    script = {1: [call("write", key="k", value="v"), "Reflection 1."]}
    with scripted_stub(script) as server:
        common: dict[str, Any] = {
            "cycles": 1,
            "ollama": {"host": server.url},
            "tools": {"entry_points": False},
            "limits": {"memory_value_chars": 10},
        }
        renamed = write_config(
            tmp_path / "a.yaml", sqlite_backend, run_id="renamed", hooks=["guards:rename"], **common
        )
        assert cli(sqlite_backend, "run", str(renamed), env=env).returncode == 0
    [ran] = [
        e["payload"] for e in read_log(sqlite_backend, "renamed") if e["event_type"] == "TOOL_CALL"
    ]
    assert ran["parameters"] == {"key": "guarded-k", "value": "v"}
    assert ran["model_parameters"] == {"key": "k", "value": "v"}
    assert ran["rewritten_by"] == ["guards:rename"]

    script = {1: [call("write", key="k", value="v"), "Reflection 1."]}
    with scripted_stub(script) as server:
        common["ollama"] = {"host": server.url}
        oversize = write_config(
            tmp_path / "b.yaml",
            sqlite_backend,
            run_id="oversize",
            hooks=["guards:oversize"],
            **common,
        )
        assert cli(sqlite_backend, "run", str(oversize), env=env).returncode == 0
    log = read_log(sqlite_backend, "oversize")
    [ran] = [e["payload"] for e in log if e["event_type"] == "TOOL_CALL"]
    # The memory tool refused the hook's value, not the model's: the result says so.
    assert ran["parameters"]["value"] == "x" * 100 and ran["model_parameters"]["value"] == "v"
    assert ran["error"] and ran["rewritten_by"] == ["guards:oversize"]


def test_a_mistaken_guard_fails_the_run_in_one_line_and_the_tool_never_runs(
    tmp_path: Path, sqlite_backend: Backend
) -> None:
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "guards.py").write_text(GUARDS)
    env = {"PYTHONPATH": str(hooks)}
    script = {1: [call("write", key="k", value="v"), "Reflection 1."]}
    with scripted_stub(script) as server:
        config = write_config(
            tmp_path / "c.yaml",
            sqlite_backend,
            run_id="mistaken",
            cycles=1,
            ollama={"host": server.url},
            tools={"entry_points": False},
            hooks=["guards:mistaken"],
        )
        failed = cli(sqlite_backend, "run", str(config), env=env)
    assert failed.returncode == 1
    assert failed.stderr.splitlines() == [
        "contreact: run mistaken failed: hook guards:mistaken before_tool_call returned "
        "'veto please': a guard answers None (the call runs), Veto(reason) or Rewrite(args) "
        "(or {'veto': reason} or {'args': {...}}); the tool did not run; once that is fixed, "
        f"`contreact resume mistaken --storage {sqlite_backend.data_dir}` continues it"
    ]
    log = read_log(sqlite_backend, "mistaken")
    assert not [e for e in log if e["event_type"] == "TOOL_CALL"]
    memory = cli(sqlite_backend, "memory", "mistaken", "--json")
    assert memory.returncode == 0 and '"k"' not in memory.stdout
