"""`contreact.launch`: which commands a daemon starts, and when the command runs here instead."""

from __future__ import annotations

import os
import socket
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from contreact.launch import Lines, command_of, forward, send, socket_path


@pytest.mark.parametrize(
    ("argv", "command"),
    [
        (["resume", "r1", "--cycles", "1"], "resume"),
        (["--data-dir", "run", "show", "r1"], "show"),
        (["--db-url", "postgresql://h/db", "--debug", "report", "r"], "report"),
        (["--data-dir=runs", "pei", "r"], "pei"),
        (["--help"], None),
        (["--version"], None),
        ([], None),
    ],
)
def test_the_command_is_found_past_the_global_options(argv: list[str], command: str) -> None:
    assert command_of(argv) == command


@pytest.fixture
def fake_daemon(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, list[Any]]]:
    """A socket answering every request with `{"stale": true}`, as a daemon on old code does."""
    folder = Path(tempfile.mkdtemp(prefix="crl-"))
    path = folder / "d.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(4)
    seen: list[Any] = []

    def answer() -> None:
        conn, _ = listener.accept()
        with conn:
            lines = Lines(conn)
            seen.append(lines.next())
            send(conn, {"stale": True})
            for fd in lines.fds:
                os.close(fd)

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    monkeypatch.setenv("CONTREACT_DAEMON", str(path))
    yield path, seen
    listener.close()


def test_a_daemon_on_other_code_leaves_the_command_to_this_process(
    fake_daemon: tuple[Path, list[Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    path, seen = fake_daemon
    assert socket_path() == path
    assert forward(["resume", "r1", "--cycles", "1"]) is None
    request = seen[0]["run"]
    assert request["argv"] == ["resume", "r1", "--cycles", "1"]
    assert request["fingerprint"]
    assert "the daemon was started on other code" in capsys.readouterr().err


def test_commands_a_daemon_does_not_start_never_reach_it(
    fake_daemon: tuple[Path, list[Any]],
) -> None:
    _, seen = fake_daemon
    assert forward(["chat", "r1"]) is None
    assert forward(["batch", "b.yaml"]) is None
    assert seen == []


def test_off_means_no_daemon(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONTREACT_DAEMON", "off")
    assert socket_path() is None
    assert forward(["resume", "r1"]) is None
