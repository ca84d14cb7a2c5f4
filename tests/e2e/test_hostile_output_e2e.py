"""Hostile model output and server answers that once wedged a run (docs/faults.md).

A 401-digit integer in a tool call made every checkpoint write fail (msgpack holds 64-bit
integers), and `resume` failed the same way; an HTTP 500 whose body is a JSON list crashed
the Ollama client with AttributeError instead of taking the retry path.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contreact.nodes.storable import storable
from contreact.stub import StubServer
from support.backends import Backend
from support.cli import cli_in_process
from support.fuzz import CONTROLS
from support.runs import outcome, read_log, write_config
from support.stub import scripted_stub

HUGE = int("1" + "0" * 400)


def test_unstorable_values_become_text_losslessly() -> None:
    value = {"n": HUGE, "f": float("nan"), "s": "a\ud800b", "ok": [1, 2.5, True, None, "x"]}
    kept, changed = storable(value)
    assert changed
    assert kept == {"n": str(HUGE), "f": "nan", "s": "a\\ud800b", "ok": [1, 2.5, True, None, "x"]}
    assert storable({"ok": [1, "x"]}) == ({"ok": [1, "x"]}, False)
    deep: list[object] = []
    for _ in range(5000):
        deep = [deep]
    flat, changed = storable(deep)
    assert changed
    text = flat
    for _ in range(64):
        text = text[0]
    assert text == "[" * (5001 - 64) + "]" * (5001 - 64)  # 5,000 wraps of []


@pytest.mark.parametrize(
    "reply",
    [
        {"content": f'{{"name": "nope", "arguments": {{"n": {HUGE}}}}}'},
        {"content": f'{{"name": "write", "arguments": {{"key": "k", "value": {HUGE}}}}}'},
        {"tool_calls": [{"name": "write", "arguments": {"key": "big", "value": HUGE}}]},
    ],
    ids=["unknown-tool-text", "known-tool-text", "native-call"],
)
def test_a_401_digit_integer_never_wedges_a_run(
    tmp_path: Path, sqlite_backend: Backend, reply: dict[str, object]
) -> None:
    script = {1: [reply, {"content": "Reflection: done."}]}
    with scripted_stub(script) as server:
        config = write_config(tmp_path / "c.yaml", sqlite_backend, cycles=1)
        done = cli_in_process(sqlite_backend, "run", str(config), "--host", server.url)
    assert done.returncode == 0, done.stderr
    cycles, memory, _ = outcome(sqlite_backend, "run-1")
    assert cycles[0][1] == "Reflection: done."
    if 'arguments": {"key"' in str(reply.get("content", "")) or reply.get("tool_calls"):
        # The value was stored, digit for digit, as text.
        assert str(HUGE) in memory.values()


def test_http_500_with_a_list_body_is_retried(tmp_path: Path, backend: Backend) -> None:
    with StubServer().start() as server:
        server.add_faults(
            {"kind": "http", "status": 500, "body": "[]"},
            {"kind": "http", "status": 502, "body": '"bad gateway"'},
        )
        config = write_config(tmp_path / "c.yaml", backend, cycles=1, ollama={"host": server.url})
        done = cli_in_process(backend, "run", str(config))
        statuses = [r["status"] for r in server.requests()]
    assert done.returncode == 0, done.stderr
    assert statuses[:3] == [500, 502, 200]
    first = next(e for e in read_log(backend, "run-1") if e["event_type"] == "LLM_INVOCATION")
    assert [r["kind"] for r in first["payload"]["retries"]] == ["server", "server"]


def test_http_400_with_a_list_body_fails_with_one_line(
    tmp_path: Path, sqlite_backend: Backend
) -> None:
    with StubServer().start() as server:
        server.add_faults({"kind": "http", "status": 400, "body": "[]"})
        config = write_config(tmp_path / "c.yaml", sqlite_backend, cycles=1)
        done = cli_in_process(sqlite_backend, "run", str(config), "--host", server.url)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr and "AttributeError" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_doctor_never_shows_a_storage_password(tmp_path: Path) -> None:
    backend = Backend(
        "postgres",
        tmp_path / "runs",
        "postgresql+psycopg://contreact:s3cret-pw@127.0.0.1:5432/no_such_database_here",
    )
    with StubServer().start() as server:
        done = cli_in_process(backend, "doctor", "--model", "stub-model", "--host", server.url)
    assert "s3cret-pw" not in done.stdout + done.stderr
    assert "contreact:***@127.0.0.1" in done.stdout


def test_every_control_character_is_stored_and_read_back_as_it_was(
    tmp_path: Path, backend: Backend
) -> None:
    """NUL in a reflection once stopped a PostgreSQL run for good, `resume` included.

    One run carries every control character (U+0000-U+001F, U+007F) in a reflection, a
    memory key and value, and another tool's argument; each is read back exactly, and the
    run's checkpoint carries them into the cycle that extends it.
    """
    key, value = f"k{CONTROLS}", f"v{CONTROLS}"
    script = {
        1: [
            {
                "tool_calls": [
                    {"name": "write", "arguments": {"key": key, "value": value}},
                    {"name": "read", "arguments": {"key": key}},
                    {"name": "read", "arguments": {"key": CONTROLS}},
                ]
            },
            {"content": f"Reflection: <{CONTROLS}> end"},
        ],
        2: [{"content": f"Reflection: again <{CONTROLS}>"}],
    }
    with scripted_stub(script) as server:
        config = write_config(tmp_path / "c.yaml", backend, cycles=1)
        done = cli_in_process(backend, "run", str(config), "--host", server.url)
        assert done.returncode == 0, done.stderr
        extended = cli_in_process(backend, "resume", "run-1", "--cycles", "1")
        assert extended.returncode == 0, extended.stderr
    shown = json.loads(cli_in_process(backend, "show", "run-1", "--json").stdout)
    assert [f"<{CONTROLS}>" in c["reflection"] for c in shown] == [True, True], shown
    memory = json.loads(cli_in_process(backend, "memory", "run-1", "--json").stdout)
    assert memory == {key: value}
    exported = cli_in_process(backend, "export", "run-1").stdout
    events = [json.loads(line) for line in exported.split("\n") if line]
    calls = [e["payload"] for e in events if e["event_type"] == "TOOL_CALL"]
    assert [c["parameters"] for c in calls] == [
        {"key": key, "value": value},
        {"key": key},
        {"key": CONTROLS},
    ]
    assert calls[1]["output"] == value
    assert events == read_log(backend, "run-1")
