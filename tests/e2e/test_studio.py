"""LangGraph Studio: the real `langgraph dev` server over the CLI's data directory.

One dev server (the project's langgraph.json, offline, no API key) serves the module. It
must expose the graph and its five nodes, run cycles against the stub through the HTTP
API, pause on an operator message and resume with the reply given through the API, and
show runs the CLI made in the same data directory without harming them. A last test
opens the Studio checkpointer in-process on both storage backends.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from support.backends import Backend
from support.cli import cli_env, cli_in_process
from support.paths import ROOT
from support.runs import read_log, write_config
from support.stub import scripted_stub

NODES = {"assemble", "invoke", "parse", "dispatch", "reflect"}
STARTUP_TIMEOUT_S = 60.0
DEAD_PROXY = "http://127.0.0.1:9"


def call(name: str, **arguments: str) -> dict[str, object]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class DevServer:
    url: str
    backend: Backend
    log: Path
    startup_s: float

    def client(self) -> httpx.Client:
        # trust_env=False: the server's environment has dead proxies, the test's may too.
        return httpx.Client(base_url=self.url, timeout=60, trust_env=False)

    def log_text(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")


def server_env(data_dir: Path) -> dict[str, str]:
    """The CLI's environment, minus every credential, with the network closed off."""
    env = cli_env({"CONTREACT_HOME": str(data_dir)})
    for key in list(env):
        if key.endswith("_API_KEY") or key in ("CONTREACT_DB_URL", "LANGSMITH_ENDPOINT"):
            del env[key]
    # Anything that tries to go online fails at once; the stub is on 127.0.0.1.
    for key in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        env[key] = env[key.lower()] = DEAD_PROXY
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    env["LANGSMITH_TRACING"] = env["LANGCHAIN_TRACING_V2"] = "false"
    return env


def project_config() -> dict[str, Any]:
    """The project's langgraph.json with every path made absolute (and checked to exist).

    The server then runs in a scratch directory: it keeps a cache of its threads in
    `.langgraph_api/` under its working directory, and the test's threads (whose
    checkpoints vanish with the temp dir) must not show up in a developer's Studio.
    """
    config: dict[str, Any] = json.loads((ROOT / "langgraph.json").read_text(encoding="utf-8"))

    def absolute(spec: str) -> str:
        path, attribute = spec.rsplit(":", 1)
        target = (ROOT / path).resolve()
        assert target.is_file(), f"langgraph.json names a missing file: {spec}"
        return f"{target}:{attribute}"

    config["graphs"] = {name: absolute(spec) for name, spec in config["graphs"].items()}
    config["checkpointer"]["path"] = absolute(config["checkpointer"]["path"])
    config["dependencies"] = [str((ROOT / d).resolve()) for d in config["dependencies"]]
    return config


@pytest.fixture(scope="module")
def dev_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    root = tmp_path_factory.mktemp("studio")
    backend = Backend("sqlite", root / "runs")
    config_path = root / "langgraph.json"
    config_path.write_text(json.dumps(project_config()), encoding="utf-8")
    langgraph = Path(sys.executable).parent / "langgraph"
    if not langgraph.exists():
        pytest.fail(f"{langgraph} is missing: install the dev extra (pip install -e '.[dev]')")
    port = free_port()
    log = root / "dev-server.log"
    started = time.monotonic()
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            [str(langgraph), "dev", "--no-browser", "--no-reload", "--port", str(port)]
            + ["--config", str(config_path)],
            cwd=root,
            env=server_env(backend.data_dir),
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: the finally kills all of it
        )
    server = DevServer(f"http://127.0.0.1:{port}", backend, log, 0.0)
    try:
        with server.client() as client:
            while True:
                if proc.poll() is not None:
                    pytest.fail(
                        f"langgraph dev exited with {proc.returncode}:\n{server.log_text()}"
                    )
                if time.monotonic() - started > STARTUP_TIMEOUT_S:
                    pytest.fail(
                        f"langgraph dev not up after {STARTUP_TIMEOUT_S}s:\n{server.log_text()}"
                    )
                try:
                    if client.get("/ok", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                time.sleep(0.1)
        server.startup_s = time.monotonic() - started
        print(f"langgraph dev answered /ok after {server.startup_s:.1f}s")
        yield server
    finally:
        from contreact.checkpoints.engines import dispose_engines

        dispose_engines()
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=15)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=15)


def assert_no_blocking_calls(server: DevServer) -> None:
    """The dev server's blockbuster raises BlockingError for sync I/O on its event loop."""
    text = server.log_text()
    assert "typing_extensions.TypedDict" not in text, text[-4000:]
    assert "BlockingError" not in text, text[-4000:]
    assert "synchronous blocking call" not in text.lower(), text[-4000:]


def checkpoint_rows(backend: Backend, thread_id: str) -> tuple[int, int, str]:
    """(checkpoints, pending writes, newest checkpoint id) of a thread, read directly."""
    with closing(sqlite3.connect(backend.storage().sqlite_path)) as conn:
        count, newest = conn.execute(
            "SELECT count(*), max(checkpoint_id) FROM checkpoints WHERE thread_id = ?",
            (thread_id,),
        ).fetchone()
        (writes,) = conn.execute(
            "SELECT count(*) FROM writes WHERE thread_id = ?", (thread_id,)
        ).fetchone()
    return int(count), int(writes), str(newest)


OPERATOR_SCRIPT: dict[int, list[Any]] = {
    1: [
        call("write", key="topic", value="tides"),
        call("send_message_to_operator", message="Is anyone there?"),
        {"content": "Reflection one: the operator answered."},
    ],
    2: [{"content": "Reflection two."}],
}


def test_graph_runs_and_operator_replies_through_the_api(dev_server: DevServer) -> None:
    from contreact.checkpoints.engines import engine_for
    from contreact.checkpoints.saver import open_saver
    from contreact.graph import builder
    from contreact.tools.memory import memory_snapshot

    assert dev_server.startup_s < 45
    with dev_server.client() as api, scripted_stub(OPERATOR_SCRIPT) as stub:
        # The graph and its five nodes, as Studio finds them.
        assistants = api.post("/assistants/search", json={"graph_id": "contreact"}).json()
        assert len(assistants) == 1
        drawn = api.get(f"/assistants/{assistants[0]['assistant_id']}/graph").json()
        # Studio's input form: run id, cycles and task (a schema that loads on Python 3.11).
        schemas = api.get(f"/assistants/{assistants[0]['assistant_id']}/schemas").json()
        assert set(schemas["input_schema"]["properties"]) == {"run_id", "last_cycle", "task"}
        assert {n["id"] for n in drawn["nodes"]} == NODES | {"__start__", "__end__"}
        routed = {(e["source"], e["target"]) for e in drawn["edges"] if e.get("conditional")}
        assert routed == {
            ("parse", "dispatch"),
            ("parse", "assemble"),
            ("parse", "reflect"),
            ("reflect", "assemble"),
            ("reflect", "__end__"),
        }

        thread_id = str(uuid.uuid4())
        assert api.post("/threads", json={"thread_id": thread_id}).status_code == 200
        # The context takes a run config's keys (it is the config's settings model).
        context = {
            "model": "stub-model",
            "ollama": {"host": stub.url, "timeout_s": 20, "retries": 1, "retry_budget_s": 10},
        }
        first = api.post(
            f"/threads/{thread_id}/runs/wait",
            json={
                "assistant_id": "contreact",
                "input": {"run_id": "studio-run", "last_cycle": 2},
                "context": context,
            },
        )
        assert first.status_code == 200, first.text

        # Paused in dispatch on the operator message, nothing answered yet.
        state = api.get(f"/threads/{thread_id}/state").json()
        assert state["next"] == ["dispatch"]
        asks = [i["value"] for t in state["tasks"] for i in t["interrupts"]]
        assert asks == [
            {
                "type": "operator_message",
                "run_id": "studio-run",
                "cycle": 1,
                "message": "Is anyone there?",
            }
        ]
        assert api.get(f"/threads/{thread_id}").json()["status"] == "interrupted"
        assert len(stub.requests()) == 2
        # Registered at its first step: the CLI lists it and sees what it waits on.
        backend = dev_server.backend
        listed = json.loads(cli_in_process(backend, "list", "--json").stdout)
        assert {(r["run_id"], r["origin"]) for r in listed} >= {("studio-run", "studio")}
        pending = cli_in_process(backend, "operator")
        assert "studio-run" in pending.stdout and "Is anyone there?" in pending.stdout

        resumed = api.post(
            f"/threads/{thread_id}/runs/wait",
            json={
                "assistant_id": "contreact",
                "command": {"resume": "Yes, I read you."},
                "context": context,
            },
        )
        assert resumed.status_code == 200, resumed.text
        requests = stub.requests()
        state = api.get(f"/threads/{thread_id}/state").json()
        assert api.get(f"/threads/{thread_id}").json()["status"] == "idle"

        # The CLI's research commands work on the Studio-started run too.
        backend = dev_server.backend
        forked = cli_in_process(
            backend, "fork", "studio-run", "--cycle", "1", "--as", "studio-fork"
        )
        assert forked.returncode == 0, forked.stderr
        rated = cli_in_process(backend, "pei", "studio-run", "-e", "stub-model", "--json")
        assert rated.returncode == 0, rated.stderr
        reported = cli_in_process(
            backend, "report", "studio-run", "--out", str(backend.data_dir / "rep")
        )
        assert reported.returncode == 0, reported.stderr
        assert list((backend.data_dir / "rep").glob("*.html"))

        # A second Studio run paused on the operator is answered from the CLI.
        second = str(uuid.uuid4())
        assert api.post("/threads", json={"thread_id": second}).status_code == 200
        paused = api.post(
            f"/threads/{second}/runs/wait",
            json={
                "assistant_id": "contreact",
                "input": {"run_id": "studio-run-2", "last_cycle": 1},
                "context": context,
            },
        )
        assert paused.status_code == 200, paused.text
        # Studio left the run waiting: every command that shows it says paused.
        waiting = json.loads(cli_in_process(backend, "status", "studio-run-2", "--json").stdout)
        assert waiting["status"] == "paused"
        listed = json.loads(cli_in_process(backend, "list", "--json").stdout)
        assert {r["run_id"]: r["status"] for r in listed}["studio-run-2"] == "paused"
        replied = cli_in_process(backend, "reply", "studio-run-2", "Answered from the CLI.")
        assert replied.returncode == 0, replied.stderr + replied.stdout
        log2 = read_log(backend, "studio-run-2")
        answers = [e["payload"]["reply"] for e in log2 if e["event_type"] == "OPERATOR_MESSAGE"]
        assert answers == ["Answered from the CLI."]
        done = json.loads(cli_in_process(backend, "status", "studio-run-2", "--json").stdout)
        assert done["status"] == "completed"

        # A Studio run that fails in the server is failed for the CLI too, with the reason.
        third = str(uuid.uuid4())
        assert api.post("/threads", json={"thread_id": third}).status_code == 200
        api.post(
            f"/threads/{third}/runs/wait",
            json={
                "assistant_id": "contreact",
                "input": {"run_id": "studio-run-3", "last_cycle": 1},
                "context": {**context, "model": "no-such-model"},
            },
        )
        assert api.get(f"/threads/{third}").json()["status"] == "error"
        deadline = time.monotonic() + 10
        while (
            failed := json.loads(cli_in_process(backend, "status", "studio-run-3", "--json").stdout)
        )["status"] != "failed" and time.monotonic() < deadline:
            time.sleep(0.5)
        assert failed["status"] == "failed"
        assert "no-such-model" in failed["reason"], failed

    assert state["next"] == []
    assert {k: state["values"][k] for k in ("run_id", "cycle", "status")} == {
        "run_id": "studio-run",
        "cycle": 2,
        "status": "completed",
    }
    # The model got the reply as the tool result, once.
    tool_turns = [m for m in requests[2]["body"]["messages"] if m["role"] == "tool"]
    assert tool_turns[-1]["content"] == "Yes, I read you."
    assert len(requests) == 4  # the Studio run's own calls, before the fork and PEI

    # Persisted where the CLI looks: the event log, the memory table, the checkpoints.
    storage = dev_server.backend.storage()
    log = read_log(dev_server.backend, "studio-run")
    operator = [e for e in log if e["event_type"] == "OPERATOR_MESSAGE"]
    assert len(operator) == 1
    assert operator[0]["payload"]["message"] == "Is anyone there?"
    assert operator[0]["payload"]["reply"] == "Yes, I read you."
    ends = [e["payload"]["final_reflection"] for e in log if e["event_type"] == "CYCLE_END"]
    assert ends == ["Reflection one: the operator answered.", "Reflection two."]
    assert [e["event_type"] for e in log].count("RUN_END") == 1
    assert memory_snapshot(engine_for(storage), "studio-run") == {"topic": "tides"}
    with open_saver(storage) as saver:
        snapshot = builder.compile(checkpointer=saver).get_state(
            {"configurable": {"thread_id": thread_id}}
        )
    assert snapshot.values["status"] == "completed" and snapshot.values["cycle"] == 2
    status = json.loads(cli_in_process(dev_server.backend, "status", "studio-run", "--json").stdout)
    assert (status["status"], status["thread_id"]) == ("completed", thread_id)
    shown = cli_in_process(dev_server.backend, "show", "studio-run")
    assert "Reflection two." in shown.stdout, shown.stderr
    assert_no_blocking_calls(dev_server)


def poll_thread_status(
    api: httpx.Client, thread_id: str, wanted: str, timeout_s: float = 10
) -> str:
    """The thread's status in the server's thread list once it is `wanted` (or at timeout)."""
    deadline = time.monotonic() + timeout_s
    while True:
        status = str(api.get(f"/threads/{thread_id}").json()["status"])
        if status == wanted or time.monotonic() > deadline:
            return status
        time.sleep(0.2)


def poll_state(api: httpx.Client, thread_id: str, timeout_s: float = 20) -> dict[str, Any]:
    """The thread's state once the server lists it (CLI runs are published every 2 s)."""
    deadline = time.monotonic() + timeout_s
    while True:
        response = api.get(f"/threads/{thread_id}/state")
        if response.status_code == 200:
            state: dict[str, Any] = response.json()
            return state
        assert response.status_code == 404, response.text
        assert time.monotonic() < deadline, f"thread {thread_id} never appeared"
        time.sleep(0.25)


def test_cli_run_is_readable_in_studio_and_stays_intact(
    tmp_path: Path, dev_server: DevServer
) -> None:
    backend = dev_server.backend
    script: dict[int, list[Any]] = {
        1: [
            call("write", key="a", value="1"),
            call("send_message_to_operator", message="Anyone out there?"),
            {"content": "CLI reflection one."},
        ],
        2: [{"content": "CLI reflection two."}],
    }
    with scripted_stub(script) as stub, dev_server.client() as api:
        config = write_config(
            tmp_path / "run.yaml",
            backend,
            run_id="cli-run",
            cycles=2,
            ollama={"host": stub.url},
            operator={"mode": "queue"},
        )
        assert (
            cli_in_process(backend, "run", str(config)).returncode == 3
        )  # paused for the operator
        status = json.loads(cli_in_process(backend, "status", "cli-run", "--json").stdout)
        thread_id = status["thread_id"]
        written_by_cli = checkpoint_rows(backend, thread_id)

        # Studio sees the paused run and the message it waits on.
        state = poll_state(api, thread_id)
        assert (state["values"]["run_id"], state["values"]["cycle"]) == ("cli-run", 1)
        assert state["next"] == ["dispatch"]
        asks = [i["value"]["message"] for t in state["tasks"] for i in t["interrupts"]]
        assert asks == ["Anyone out there?"]
        thread = api.get(f"/threads/{thread_id}").json()
        assert thread["metadata"]["graph_id"] == "contreact"
        assert thread["metadata"]["contreact_run_id"] == "cli-run"
        # The thread list tells a run waiting for its operator from an idle one.
        assert poll_thread_status(api, thread_id, "interrupted") == "interrupted"
        # One checkpoint per cycle (the default policy) and one at the pause.
        assert len(api.post(f"/threads/{thread_id}/history", json={"limit": 100}).json()) >= 1

        # Studio cannot delete a CLI run's checkpoints (they are the run's history).
        refused = api.delete(f"/threads/{thread_id}")
        assert refused.status_code == 400
        assert "cli-run" in refused.json()["detail"]
        assert api.get(f"/threads/{thread_id}/state").status_code == 200
        # Looking wrote nothing: not one checkpoint or pending write more or less.
        assert checkpoint_rows(backend, thread_id) == written_by_cli

        # The CLI answers and finishes the run; Studio sees the result.
        replied = cli_in_process(backend, "reply", "cli-run", "Here, loud and clear.")
        assert replied.returncode == 0, replied.stderr + replied.stdout
        state = api.get(f"/threads/{thread_id}/state").json()
        values = state["values"]
        assert (values["run_id"], values["cycle"], values["status"]) == ("cli-run", 2, "completed")
        assert state["next"] == [] and state["tasks"] == []
        assert poll_thread_status(api, thread_id, "idle") == "idle"

    shown = cli_in_process(backend, "show", "cli-run")
    assert shown.returncode == 0, shown.stderr
    assert "CLI reflection one." in shown.stdout and "CLI reflection two." in shown.stdout
    log = read_log(backend, "cli-run")
    (operator,) = [e["payload"] for e in log if e["event_type"] == "OPERATOR_MESSAGE"]
    assert (operator["reply"], operator["policy"]) == ("Here, loud and clear.", "queue")
    assert [e["event_type"] for e in log].count("RUN_END") == 1
    assert_no_blocking_calls(dev_server)


def test_studio_checkpointer_reads_cli_runs_on_each_backend(
    tmp_path: Path, backend: Backend
) -> None:
    """In-process: the async saver Studio gets sees the CLI's checkpoints (SQLite, PostgreSQL)."""
    from contreact.checkpoints.engines import engine_for
    from contreact.checkpoints.registry import get_run
    from contreact.checkpoints.studio import RegisteredRunError, open_async_saver
    from contreact.graph import builder

    with scripted_stub({1: [{"content": "Only reflection."}]}) as stub:
        config = write_config(
            tmp_path / "run.yaml", backend, run_id="one", cycles=1, ollama={"host": stub.url}
        )
        assert cli_in_process(backend, "run", str(config)).returncode == 0
    storage = backend.storage()
    thread_id = get_run(engine_for(storage), "one").thread_id

    async def probe() -> None:
        async with open_async_saver(storage) as saver:
            graph = builder.compile(checkpointer=saver)
            snapshot = await graph.aget_state({"configurable": {"thread_id": thread_id}})
            assert snapshot.values["run_id"] == "one"
            assert snapshot.values["status"] == "completed"
            with pytest.raises(RegisteredRunError, match="'one'"):
                await saver.adelete_thread(thread_id)
            assert (await saver.aget_tuple({"configurable": {"thread_id": thread_id}})) is not None
            # A thread the CLI does not know (made in Studio) can be deleted.
            stranger = str(uuid.uuid4())
            await graph.aupdate_state(
                {"configurable": {"thread_id": stranger}}, {"run_id": "x"}, as_node="reflect"
            )
            await saver.adelete_thread(stranger)
            assert (await saver.aget_tuple({"configurable": {"thread_id": stranger}})) is None

    asyncio.run(probe())


FORK_SCRIPT: dict[int, list[Any]] = {
    1: [call("write", key="plan", value="cycle one plan"), {"content": "Note one."}],
    2: [call("write", key="plan", value="cycle two plan"), {"content": "Note two."}],
    3: [
        call("read", key="plan"),
        call("write", key="plan", value="cycle three plan"),
        call("send_message_to_operator", message="Shall I go on?"),
        {"content": "Note three."},
    ],
}


def tool_results(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["body"]["messages"] if m["role"] == "tool"]


def test_time_travel_with_an_edit_branches_and_leaves_the_original_intact(
    tmp_path: Path, dev_server: DevServer
) -> None:
    """Fork a finished 3-cycle run at its cycle-2 checkpoint with an edited state."""
    from langgraph_sdk import get_sync_client

    from contreact.checkpoints.engines import engine_for
    from contreact.tools.memory import memory_snapshot

    backend = dev_server.backend
    engine = engine_for(backend.storage())
    log_file = backend.data_dir / "logs" / "tt-run.jsonl"
    with scripted_stub(FORK_SCRIPT) as stub:
        config = write_config(
            tmp_path / "run.yaml",
            backend,
            run_id="tt-run",
            cycles=3,
            ollama={"host": stub.url},
            operator={"mode": "auto", "reply": "The old reply."},
        )
        assert cli_in_process(backend, "run", str(config)).returncode == 0
        original_requests = len(stub.requests())
        assert original_requests == 8
        thread_id = json.loads(cli_in_process(backend, "status", "tt-run", "--json").stdout)[
            "thread_id"
        ]
        client = get_sync_client(url=dev_server.url, api_key=None)
        poll_state(dev_server.client(), thread_id)
        head = client.threads.get_state(thread_id)
        history = client.threads.get_history(thread_id, limit=200)
        # The cycle-2 checkpoint: cycle 2 closed, cycle 3 not begun.
        (at_cycle_2,) = [
            h
            for h in history
            if h["values"].get("cycle") == 3 and not h["values"].get("messages") and h["next"]
        ]
        before = (log_file.read_bytes(), memory_snapshot(engine, "tt-run"), head["values"])

        client.threads.update_state(
            thread_id,
            {"advisory": "Edited in Studio: try something new."},
            as_node="reflect",
            checkpoint_id=at_cycle_2["checkpoint"]["checkpoint_id"],
        )
        context = {
            "model": "stub-model",
            "ollama": {"host": stub.url, "timeout_s": 20, "retries": 1},
        }
        client.runs.wait(thread_id, "contreact", input=None, context=context)
        paused = client.threads.get_state(thread_id)
        asks = [i["value"]["message"] for t in paused["tasks"] for i in t["interrupts"]]
        assert asks == ["Shall I go on?"]
        streamed = {
            part.data[0]["id"]
            for part in client.runs.stream(
                thread_id,
                "contreact",
                command={"resume": "A brand new reply."},
                context=context,
                stream_mode="messages-tuple",
            )
            if part.event == "messages" and part.data[0].get("type", "").startswith("AIMessage")
        }
        fork_requests = stub.requests()[original_requests:]
        branch = client.threads.get_state(thread_id)

    # The fork's steps called the model afresh: cycle 3's four calls, none replayed.
    assert len(fork_requests) == 4
    assert "Edited in Studio" in fork_requests[0]["body"]["messages"][0]["content"]
    # Memory on the fork reads as it was at the end of cycle 2.
    assert tool_results(fork_requests[1]) == ["cycle two plan"]
    # The new operator reply reached the model.
    assert tool_results(fork_requests[3])[-1] == "A brand new reply."
    assert branch["values"]["status"] == "completed" and branch["values"]["lineage"]
    # Streamed answers carry the ids of the stored messages (a client keyed by id shows each once).
    stored = {m["id"] for m in branch["values"]["messages"] if m["type"] == "ai"}
    assert streamed and streamed <= stored, (streamed, stored)
    # The original branch: log, memory and final state byte-identical.
    after_head = client.threads.get_state(
        thread_id, checkpoint_id=head["checkpoint"]["checkpoint_id"]
    )
    assert log_file.read_bytes() == before[0]
    assert memory_snapshot(engine, "tt-run") == before[1] == {"plan": "cycle three plan"}
    assert after_head["values"] == before[2]
    # The branch has its own log and memory, inheriting cycles 1-2.
    scope = f"tt-run@{branch['values']['lineage']}"
    branch_log = read_log(backend, scope)
    ends = [e["payload"]["final_reflection"] for e in branch_log if e["event_type"] == "CYCLE_END"]
    assert ends == ["Note one.", "Note two.", "Note three."]
    replies = [e["payload"]["reply"] for e in branch_log if e["event_type"] == "OPERATOR_MESSAGE"]
    assert replies == ["A brand new reply."]
    assert memory_snapshot(engine, scope) == {"plan": "cycle three plan"}
    assert_no_blocking_calls(dev_server)
