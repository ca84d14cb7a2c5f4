"""Credentials in an Ollama host URL: taken out of the host, remembered for this process."""

from __future__ import annotations

import pytest

from contreact.ollama import credentials as host_credentials
from contreact.ollama.credentials import (
    ENV,
    credentials_for,
    for_children,
    hide_credentials,
    split_credentials,
)
from contreact.ollama.hosts import resolve_host


@pytest.mark.parametrize(
    ("url", "clean", "credentials"),
    [
        ("http://u:p@h:1/x", "http://h:1/x", ("u", "p")),
        ("u:p@h", "h", ("u", "p")),
        ("https://al%40ice:p%3Aw%2F@h", "https://h", ("al@ice", "p:w/")),
        ("https://token@h", "https://h", ("token", "")),
        ("http://h:1/path@x", "http://h:1/path@x", None),
        ("http://h:1", "http://h:1", None),
    ],
)
def test_split_credentials(url: str, clean: str, credentials: tuple[str, str] | None) -> None:
    assert split_credentials(url) == (clean, credentials)


def test_a_resolved_host_has_no_credentials_and_its_requests_get_them() -> None:
    assert resolve_host("http://bob:pw-1@10.9.8.7:5000/proxy/") == "http://10.9.8.7:5000/proxy"
    assert credentials_for("http://10.9.8.7:5000/proxy/api/chat") == ("bob", "pw-1")
    assert credentials_for("http://10.9.8.7:5000/other/api/chat") is None
    assert credentials_for("http://10.9.8.7:5001/proxy/api/chat") is None


def test_messages_hide_credentials() -> None:
    assert hide_credentials("bad host 'http://u:secret@h:99999'") == "bad host 'http://h:99999'"


def test_a_child_process_inherits_the_credentials_through_its_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    resolve_host("http://carol:pw-2@10.9.8.6:5000")
    handed = for_children()
    assert "pw-2" in handed[ENV]
    monkeypatch.setattr(host_credentials, "_known", {})
    assert credentials_for("http://10.9.8.6:5000/api/chat") is None
    monkeypatch.setenv(ENV, handed[ENV])
    assert credentials_for("http://10.9.8.6:5000/api/chat") == ("carol", "pw-2")
    monkeypatch.setenv(ENV, "not json")
    assert credentials_for("http://10.9.8.6:5000/api/chat") is None
