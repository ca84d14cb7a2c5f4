"""The operator channel end to end: auto replies in order, the queue, reply, kill while paused."""

from __future__ import annotations

import json
from pathlib import Path

from support.backends import Backend
from support.cli import cli, cli_in_process, cli_start, kill_when
from support.runs import read_log, write_config
from support.stub import scripted_stub


def ask(message: str) -> dict[str, object]:
    return {"tool_calls": [{"name": "send_message_to_operator", "arguments": {"message": message}}]}


THREE_QUESTIONS = {c: [ask(f"question {c}"), {"content": f"Reflection {c}."}] for c in (1, 2, 3)}
ONE_QUESTION = {1: [ask("are you there?"), {"content": "Reflection 1."}], 2: ["Reflection 2."]}


def operator_events(backend: Backend, run_id: str) -> list[dict]:
    return [
        e["payload"] for e in read_log(backend, run_id) if e["event_type"] == "OPERATOR_MESSAGE"
    ]


def test_auto_replies_in_order_then_the_fixed_reply(
    tmp_path: Path, sqlite_backend: Backend
) -> None:
    replies = tmp_path / "replies.txt"
    replies.write_text("first answer\n\nsecond answer\n")
    with scripted_stub(THREE_QUESTIONS) as server:
        config = write_config(
            tmp_path / "c.yaml",
            sqlite_backend,
            run_id="auto",
            cycles=3,
            ollama={"host": server.url},
            operator={"mode": "auto", "reply": "fallback", "replies_file": "replies.txt"},
        )
        result = cli_in_process(sqlite_backend, "run", str(config))
        requests = [r["body"] for r in server.requests()]
    assert result.returncode == 0, result.stderr
    events = operator_events(sqlite_backend, "auto")
    assert [(e["message"], e["reply"], e["policy"]) for e in events] == [
        ("question 1", "first answer", "auto"),
        ("question 2", "second answer", "auto"),
        ("question 3", "fallback", "auto"),
    ]
    assert all(isinstance(e["wait_s"], float) for e in events)
    # The model received each reply as the tool's result.
    results = [m["content"] for b in requests for m in b["messages"][-1:] if m["role"] == "tool"]
    assert results == ["first answer", "second answer", "fallback"]


def test_no_reply_policy(tmp_path: Path, sqlite_backend: Backend) -> None:
    with scripted_stub(ONE_QUESTION) as server:
        config = write_config(
            tmp_path / "c.yaml",
            sqlite_backend,
            run_id="silent",
            cycles=1,
            ollama={"host": server.url},
            operator={"no_reply": True},
        )
        assert cli_in_process(sqlite_backend, "run", str(config)).returncode == 0
    assert operator_events(sqlite_backend, "silent")[0]["reply"] == "(The operator did not reply.)"


def test_queue_two_runs_reply_one_kill_while_paused(tmp_path: Path, backend: Backend) -> None:
    with scripted_stub(ONE_QUESTION) as server:
        for name in ("qa", "qb"):
            config = write_config(
                tmp_path / f"{name}.yaml",
                backend,
                run_id=name,
                cycles=2,
                ollama={"host": server.url},
                operator={"mode": "queue"},
            )
            paused = cli_in_process(backend, "run", str(config))
            assert paused.returncode == 3, paused.stderr
            assert "contreact reply" in paused.stdout
        listed = json.loads(cli_in_process(backend, "operator", "--json").stdout)
        assert sorted((p["run_id"], p["cycle"], p["message"]) for p in listed) == [
            ("qa", 1, "are you there?"),
            ("qb", 1, "are you there?"),
        ]
        assert (
            json.loads(cli_in_process(backend, "status", "qa", "--json").stdout)["status"]
            == "paused"
        )

        # A plain resume of a queued run leaves it waiting (exit 3), asking nothing twice.
        assert cli_in_process(backend, "resume", "qa").returncode == 3
        done = cli_in_process(backend, "reply", "qa", "yes, here")
        assert done.returncode == 0, done.stderr
        assert [
            p["run_id"] for p in json.loads(cli_in_process(backend, "operator", "--json").stdout)
        ] == ["qb"]
        assert cli_in_process(backend, "reply", "qa", "again").returncode == 2

        # Kill the process that is carrying qb's reply while its next model call is in flight.
        seen = len(server.requests())
        server.add_faults({"kind": "delay", "seconds": 60})
        proc = cli_start(backend, "reply", "qb", "late but here")
        kill_when(proc, lambda: len(server.requests()) > seen)
        server.reset(faults=True)
        resumed = cli_in_process(backend, "resume", "qb")
        assert resumed.returncode == 0, resumed.stderr

    for name, text in (("qa", "yes, here"), ("qb", "late but here")):
        events = operator_events(backend, name)
        assert [(e["reply"], e["policy"]) for e in events] == [(text, "queue")], name
        status = json.loads(cli_in_process(backend, "status", name, "--json").stdout)
        assert status["status"] == "completed" and status["cycles_completed"] == 2
    assert json.loads(cli_in_process(backend, "operator", "--json").stdout) == []


def test_terminal_mode_without_a_console_waits_in_the_queue(
    tmp_path: Path, sqlite_backend: Backend
) -> None:
    with scripted_stub(ONE_QUESTION) as server:
        config = write_config(
            tmp_path / "c.yaml",
            sqlite_backend,
            run_id="tty",
            cycles=1,
            ollama={"host": server.url},
            operator={"mode": "terminal"},
        )
        result = cli(sqlite_backend, "run", str(config))
        assert result.returncode == 3
        assert "no interactive console" in result.stdout
        assert cli(sqlite_backend, "reply", "tty", "from the queue").returncode == 0
    assert operator_events(sqlite_backend, "tty")[0]["reply"] == "from the queue"


def test_a_reply_recorded_by_another_face_is_taken_by_the_next_drive_once(
    tmp_path: Path, sqlite_backend: Backend
) -> None:
    import pytest

    from contreact.engine.inbox import pending_operator_messages
    from contreact.engine.replies import AlreadyAnsweredError, post_reply

    with scripted_stub(ONE_QUESTION) as server:
        config = write_config(
            tmp_path / "c.yaml",
            sqlite_backend,
            run_id="rec",
            cycles=2,
            ollama={"host": server.url},
            operator={"mode": "queue"},
        )
        assert cli_in_process(sqlite_backend, "run", str(config)).returncode == 3
        storage = sqlite_backend.storage()
        (waiting,) = pending_operator_messages(storage)
        post_reply(storage, "rec", "from the console", ask=waiting.ask)
        # Answered: it leaves the list, and no second reply lands, by any face.
        assert pending_operator_messages(storage) == []
        with pytest.raises(AlreadyAnsweredError):
            post_reply(storage, "rec", "a second one", ask=waiting.ask)
        late = cli_in_process(sqlite_backend, "reply", "rec", "from the terminal")
        assert late.returncode == 2 and "not waiting" in late.stderr
        # The next drive, in whatever process, answers the agent with the recorded reply.
        assert cli_in_process(sqlite_backend, "resume", "rec").returncode == 0
    events = operator_events(sqlite_backend, "rec")
    assert [(e["reply"], e["policy"]) for e in events] == [("from the console", "queue")]
