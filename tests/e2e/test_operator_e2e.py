"""The operator channel end to end: auto replies in order, the queue, reply, kill while paused."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

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


def bare(*args: str) -> subprocess.CompletedProcess[str]:
    """`contreact ARGS` with no storage in the environment and no global flag (in-process)."""
    from contreact.checkpoints.engines import dispose_engines
    from contreact.cli.app import app

    unset: dict[str, str | None] = {k: None for k in os.environ if k.startswith("CONTREACT_")}
    try:
        result = CliRunner().invoke(app, list(args), env={**unset, "OLLAMA_HOST": None})
    finally:
        dispose_engines()
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return subprocess.CompletedProcess(args, result.exit_code, result.stdout, result.stderr)


def test_operator_and_reply_find_the_runs_by_storage_after_their_name(
    tmp_path: Path, backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    where = backend.db_url or str(backend.data_dir)
    desk = tmp_path / "desk"  # no ./runs here: without --storage nothing is found
    desk.mkdir()
    monkeypatch.chdir(desk)
    with scripted_stub(ONE_QUESTION) as server:
        config = write_config(
            tmp_path / "c.yaml",
            backend,
            run_id="flagged",
            cycles=2,
            ollama={"host": server.url},
            operator={"mode": "queue"},
        )
        assert cli_in_process(backend, "run", str(config)).returncode == 3

        listed = bare("operator", "--json", "--storage", where)
        assert listed.returncode == 0, listed.stderr
        assert [(p["run_id"], p["message"]) for p in json.loads(listed.stdout)] == [
            ("flagged", "are you there?")
        ]
        assert bare("operator", "--json").returncode == 2  # ./runs: nothing there

        misplaced = bare("operator", "--data-dir", str(backend.data_dir))
        assert misplaced.returncode == 2
        assert misplaced.stderr.strip().splitlines() == [
            "contreact: operator takes the storage as --storage DIR|URL (a data folder or a "
            "database URL), not --data-dir"
        ]

        replied = bare("reply", "flagged", "here I am", "--storage", where, "--quiet")
        assert replied.returncode == 0, replied.stderr
    assert bare("operator", "--json", "--storage", where).stdout.strip() == "[]"
    from contreact.checkpoints.engines import engine_for
    from contreact.checkpoints.event_store import read_events

    events = read_events(engine_for(backend.storage()), "flagged")
    answered = [e["payload"] for e in events if e["event_type"] == "OPERATOR_MESSAGE"]
    assert [(e["message"], e["reply"]) for e in answered] == [("are you there?", "here I am")]
    assert [e["event_type"] for e in events].count("CYCLE_END") == 2
