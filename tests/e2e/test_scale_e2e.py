"""Scale end to end: concurrent runs, batches killed and resumed, host failover, fork, extend."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

from contreact.stub import StubServer
from support.backends import Backend
from support.cli import cli, cli_env, cli_in_process
from support.paths import ROOT
from support.runs import outcome, read_log, write_config

UNSEEDED = {"seed": None}


def batch_config(path: Path, backend: Backend, **fields: object) -> Path:
    config = {
        "cycles": 3,
        "ollama": {"timeout_s": 20, "retries": 1, "retry_budget_s": 5},
        # Unseeded: replicates differ only by seed, so unseeded replicates on the
        # deterministic stub must each equal an unseeded reference run exactly.
        "model_options": UNSEEDED,
        "storage": backend.storage_yaml(),
        **fields,
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def test_eight_concurrent_runs_are_exact(tmp_path: Path, backend: Backend) -> None:
    with StubServer().start() as server:
        # Two cycles: every tool, the operator exchange and a cycle boundary, eight times at once.
        ref = write_config(
            tmp_path / "ref.yaml",
            backend,
            run_id="ref",
            cycles=2,
            ollama={"host": server.url},
            model_options=UNSEEDED,
        )
        assert cli_in_process(backend, "run", str(ref)).returncode == 0
        expected = outcome(backend, "ref")
        config = batch_config(
            tmp_path / "eight.yaml",
            backend,
            batch="eight",
            models=["stub-model"],
            replicates=8,
            parallel=8,
            cycles=2,
            ollama={"host": server.url},
        )
        result = cli(backend, "batch", str(config), "--json", timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    summary = json.loads(result.stdout[result.stdout.index("[") :])
    assert [r["status"] for r in summary] == ["completed"] * 8
    for r in summary:
        assert outcome(backend, r["run_id"]) == expected, r["run_id"]


def start_batch(backend: Backend, config: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "contreact", *backend.cli_args, "batch", str(config)],
        cwd=ROOT,
        env=cli_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def cycles_done(backend: Backend) -> int:
    from contreact.checkpoints.engines import engine_for
    from contreact.checkpoints.schema import cycles

    with engine_for(backend.storage()).connect() as conn:
        return len(conn.execute(cycles.select()).all())


def test_batch_killed_midway_resumes_every_run_once(
    tmp_path: Path, sqlite_backend: Backend
) -> None:
    backend = sqlite_backend
    models = ["stub-model", "stub-other"]
    with StubServer(models=models, latency_ms=40).start() as server:
        expected = {}
        for model in models:
            ref = write_config(
                tmp_path / f"{model}.yaml",
                backend,
                run_id=f"ref-{model}",
                model=model,
                ollama={"host": server.url},
                model_options=UNSEEDED,
            )
            assert cli_in_process(backend, "run", str(ref)).returncode == 0
            expected[model] = outcome(backend, f"ref-{model}")
        config = batch_config(
            tmp_path / "b.yaml",
            backend,
            batch="b",
            models=models,
            replicates=2,
            parallel=2,
            ollama={"host": server.url},
        )
        proc = start_batch(backend, config)
        deadline = time.monotonic() + 60
        while cycles_done(backend) < 6 + 2:  # the references' cycles, plus two of the batch's
            assert proc.poll() is None and time.monotonic() < deadline, (
                "batch ended before the kill"
            )
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate()
        time.sleep(1.0)
        from contreact.checkpoints.engines import engine_for
        from contreact.checkpoints.registry import list_runs

        batch_runs = [r for r in list_runs(engine_for(backend.storage())) if r.batch == "b"]
        assert batch_runs and not any(r.process_alive for r in batch_runs), (
            "children outlived the batch"
        )
        assert not all(r.status == "completed" for r in batch_runs), (
            "killed too late to prove anything"
        )

        again = cli(backend, "batch", str(config), timeout=300)
    assert again.returncode == 0, again.stdout + again.stderr
    for model in models:
        for replicate in (1, 2):
            run_id = f"b.{model}.r{replicate}"
            assert outcome(backend, run_id) == expected[model], run_id


def test_a_run_whose_host_is_down_moves_to_another_host(
    tmp_path: Path, sqlite_backend: Backend
) -> None:
    down = StubServer().start()
    down_url = down.url
    down.stop()
    with StubServer().start() as up:
        up_url = up.url
        config = batch_config(
            tmp_path / "h.yaml",
            sqlite_backend,
            batch="h",
            models=["stub-model"],
            replicates=2,
            cycles=1,
            ollama={"hosts": [down_url, up.url], "timeout_s": 5, "retries": 1, "retry_budget_s": 2},
        )
        result = cli(sqlite_backend, "batch", str(config), "--json", timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"warning: cannot reach Ollama at {down_url}" in result.stderr  # the pre-flight's
    summary = {r["run_id"]: r for r in json.loads(result.stdout[result.stdout.index("[") :])}
    moved = summary["h.stub-model.r1"]
    assert moved["status"] == "completed" and moved["host"] == up_url and "moved" in moved["action"]
    errors = [
        e["payload"]
        for e in read_log(sqlite_backend, "h.stub-model.r1")
        if e["event_type"] == "ERROR"
    ]
    assert errors and errors[0]["kind"] == "connection" and down_url in errors[0]["message"]
    assert (
        summary["h.stub-model.r2"]["host"] == up_url
        and "moved" not in summary["h.stub-model.r2"]["action"]
    )


def test_fork_at_cycle_two_with_another_model(tmp_path: Path, backend: Backend) -> None:
    with StubServer(models=["stub-model", "stub-other"]).start() as server:
        config = write_config(
            tmp_path / "o.yaml", backend, run_id="orig", cycles=4, ollama={"host": server.url}
        )
        assert cli_in_process(backend, "run", str(config)).returncode == 0
        before = outcome(backend, "orig")
        seen = len(server.requests())
        forked = cli_in_process(
            backend, "fork", "orig", "--cycle", "2", "--model", "stub-other", "--as", "branch"
        )
        assert forked.returncode == 0, forked.stderr + forked.stdout
        sent = [r["body"] for r in server.requests()[seen:]]
    reflections, _memory, events = outcome(backend, "branch")
    assert reflections[:2] == before[0][:2] and len(reflections) == 4
    assert reflections[2:] != before[0][2:], "cycles 3-4 come from the other model"
    assert {b["model"] for b in sent} == {"stub-other"}
    first = sent[0]["messages"]
    assert first[1]["content"] == "Cycle 3 begins."
    assert (
        "Cycle 2: " + before[0][1][1] in first[0]["content"]
        and "Cycle 3:" not in first[0]["content"]
    )

    # Memory was restored as of the end of cycle 2: in cycle 3 the keys listed, the value of
    # topic-2 read back and the deletion of topic-1 match the original's (the write differs:
    # another model words its note differently).
    def outputs(evs: list, cycle: int) -> list:
        return [
            e[2]["output"]
            for e in evs
            if e[0] == cycle
            and e[1] == "TOOL_CALL"
            and e[2]["tool_name"] in ("list", "read", "delete")
        ]

    assert outputs(events, 3) == outputs(before[2], 3)
    assert outcome(backend, "orig") == before, "the original changed"
    status = json.loads(cli_in_process(backend, "status", "branch", "--json").stdout)
    assert status["parent_run_id"] == "orig" and status["fork_cycle"] == 2


def test_extend_a_finished_run(tmp_path: Path, sqlite_backend: Backend) -> None:
    with StubServer().start() as server:
        config = write_config(
            tmp_path / "e.yaml", sqlite_backend, run_id="ext", cycles=2, ollama={"host": server.url}
        )
        assert cli_in_process(sqlite_backend, "run", str(config)).returncode == 0
        again = cli_in_process(sqlite_backend, "resume", "ext")
        assert again.returncode == 2 and "--cycles" in again.stderr
        extended = cli_in_process(sqlite_backend, "resume", "ext", "--cycles", "2")
        assert extended.returncode == 0, extended.stderr
        third = next(
            r["body"]
            for r in server.requests()
            if r["body"]["messages"][1]["content"] == "Cycle 3 begins."
        )
    ends = [
        e["cycle_number"] for e in read_log(sqlite_backend, "ext") if e["event_type"] == "CYCLE_END"
    ]
    assert ends == [1, 2, 3, 4]
    assert "Cycle 2: " in third["messages"][0]["content"]
    status = json.loads(cli_in_process(sqlite_backend, "status", "ext", "--json").stdout)
    assert status["status"] == "completed" and status["cycles_planned"] == 4
