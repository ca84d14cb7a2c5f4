"""End to end: `contreact run` against the stub over HTTP, on a real database."""

from __future__ import annotations

import json
from pathlib import Path

from contreact.nodes.prompts import SYSTEM_PROMPT
from support.backends import Backend
from support.cli import cli
from support.runs import read_log, write_config
from support.stub import scripted_stub

TOOL_NAMES = ["write", "read", "list", "delete", "pattern_search", "send_message_to_operator"]


def call(name: str, **arguments: str) -> dict[str, object]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


FOUR_CYCLES = {
    1: [
        call("write", key="alpha", value="first"),
        call("write", key="beta", value="second"),
        call("list"),
        {"content": "Reflection one: I wrote alpha and beta."},
    ],
    2: [
        call("read", key="alpha"),
        call("delete", key="beta"),
        {"content": "Reflection two: read alpha, dropped beta."},
    ],
    3: [
        call("write", key="gamma", value="third"),
        call("send_message_to_operator", message="Hello from cycle 3"),
        {"content": "Reflection three: wrote gamma, greeted the operator."},
    ],
    4: [
        call("pattern_search", pattern="a"),
        call("write", key="delta", value="fourth"),
        call("delete", key="alpha"),
        {"content": "Reflection four: searched, wrote delta, dropped alpha."},
    ],
}
REFLECTIONS = [FOUR_CYCLES[c][-1]["content"] for c in range(1, 5)]


def first_request_of_cycle(requests: list[dict], cycle: int) -> dict:
    for req in requests:
        messages = req["body"]["messages"]
        users = [m for m in messages if m["role"] == "user"]
        if (
            users
            and users[0]["content"] == f"Cycle {cycle} begins."
            and not any(m["role"] == "assistant" for m in messages)
        ):
            return req["body"]
    raise AssertionError(f"no request opens cycle {cycle}")


def test_four_cycle_run(tmp_path: Path, sqlite_backend: Backend) -> None:
    backend = sqlite_backend
    with scripted_stub(FOUR_CYCLES) as server:
        config = write_config(
            tmp_path / "run.yaml", backend, run_id="four", cycles=4, ollama={"host": server.url}
        )
        result = cli(backend, "run", str(config))
        requests = server.requests()
    assert result.returncode == 0, result.stderr + result.stdout

    # What the model was sent: the verbatim system prompt, the six tools by name.
    first = requests[0]["body"]
    assert first["messages"][0] == {"role": "system", "content": SYSTEM_PROMPT}
    assert [t["function"]["name"] for t in first["tools"]] == TOOL_NAMES
    assert first["options"]["num_ctx"] == 8192 and first["stream"] is True

    # Cycle 2 opens with cycle 1's reflection and none of cycle 1's messages.
    second = first_request_of_cycle(requests, 2)
    system = second["messages"][0]["content"]
    assert system.startswith(SYSTEM_PROMPT)
    assert f"Cycle 1: {REFLECTIONS[0]}" in system
    assert [m["role"] for m in second["messages"]] == ["system", "user"]
    assert "first" not in json.dumps(second["messages"][1:])

    # The event log: every cycle starts and ends, in order, with its reflection.
    log = read_log(backend, "four")
    bounds = [
        (e["event_type"], e["cycle_number"])
        for e in log
        if e["event_type"] in ("CYCLE_START", "CYCLE_END")
    ]
    assert bounds == [(t, c) for c in range(1, 5) for t in ("CYCLE_START", "CYCLE_END")]
    ends = [e["payload"]["final_reflection"] for e in log if e["event_type"] == "CYCLE_END"]
    assert ends == REFLECTIONS
    assert [e["event_type"] for e in log][0] == "RUN_START" and log[-1]["event_type"] == "RUN_END"
    assert all(
        set(e) == {"timestamp", "run_id", "cycle_number", "event_type", "payload"} for e in log
    )
    tools_logged = [e["payload"]["tool_name"] for e in log if e["event_type"] == "TOOL_CALL"]
    assert tools_logged == [
        c["tool_calls"][0]["name"] for cyc in FOUR_CYCLES.values() for c in cyc if "tool_calls" in c
    ]
    operator = [e["payload"] for e in log if e["event_type"] == "OPERATOR_MESSAGE"]
    assert len(operator) == 1 and operator[0]["message"] == "Hello from cycle 3"
    assert operator[0]["policy"] == "auto"

    # Memory holds exactly what the script wrote and did not delete.
    memory = cli(backend, "memory", "four", "--json")
    assert memory.returncode == 0, memory.stderr
    assert json.loads(memory.stdout) == {"gamma": "third", "delta": "fourth"}

    status = json.loads(cli(backend, "status", "four", "--json").stdout)
    assert status["status"] == "completed" and status["cycles_completed"] == 4


def test_run_refuses_existing_id(tmp_path: Path, sqlite_backend: Backend) -> None:
    backend = sqlite_backend
    with scripted_stub({}) as server:
        config = write_config(
            tmp_path / "run.yaml", backend, run_id="twice", cycles=1, ollama={"host": server.url}
        )
        assert cli(backend, "run", str(config)).returncode == 0
        again = cli(backend, "run", str(config))
    assert again.returncode == 2
    assert "already exists" in again.stderr and "contreact resume twice" in again.stderr
    assert len(again.stderr.strip().splitlines()) == 1
    # The second attempt did not touch the first run's log.
    assert sum(e["event_type"] == "RUN_START" for e in read_log(backend, "twice")) == 1


def test_a_copied_thread_cannot_write_into_a_registered_run(
    tmp_path: Path, sqlite_backend: Backend
) -> None:
    """A thread carrying another thread's run id (a Studio copy) is refused before any effect."""
    import uuid

    import pytest

    from contreact.checkpoints.engines import engine_for
    from contreact.checkpoints.event_store import read_events
    from contreact.checkpoints.persistence import ForeignThreadError
    from contreact.checkpoints.saver import open_saver
    from contreact.graph import builder
    from contreact.graph.state import Context

    backend = sqlite_backend
    with scripted_stub(FOUR_CYCLES) as server:
        config = write_config(
            tmp_path / "run.yaml", backend, run_id="owned", cycles=1, ollama={"host": server.url}
        )
        assert cli(backend, "run", str(config)).returncode == 0
        engine = engine_for(backend.storage())
        before, sent = read_events(engine, "owned"), len(server.requests())
        ctx = Context(
            model="stub-model",
            ollama={"host": server.url},
            storage={"data_dir": str(backend.data_dir)},
        )
        with open_saver(backend.storage()) as saver:
            copy = builder.compile(checkpointer=saver)
            with pytest.raises(ForeignThreadError, match="contreact fork owned"):
                copy.invoke(
                    {"run_id": "owned", "cycle": 2, "last_cycle": 2},
                    {"configurable": {"thread_id": str(uuid.uuid4())}},
                    context=ctx,
                )
        assert len(server.requests()) == sent, "the copy must not reach the model"
    assert read_events(engine, "owned") == before
