"""Error paths driven through the CLI print lines of the catalogue (docs/errors.md).

Each path prints one line that says what happened, where and what to do; it matches a
template the catalogue collected from the code, names no exception class (only `--debug`
does), hides a database password, and cuts a long input instead of echoing it whole.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from contreact.stub import StubServer
from support.backends import Backend
from support.cli import cli, cli_in_process
from support.error_catalogue import collect
from support.fuzz import CASES, FuzzServer
from support.runs import write_config

CLASS_NAME = re.compile(r"\b[A-Z][A-Za-z]*(Error|Exception)\b|psycopg\.|httpx\.")
PATTERNS = [
    re.compile(".+".join(re.escape(part) for part in re.split(r"\{[^}]*\}", s.template)) + "$")
    for s in collect()
]


def line_of(result: object) -> str:
    """The one error line a command printed, checked against the catalogue."""
    stderr = result.stderr  # type: ignore[attr-defined]
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    line = lines[0].removeprefix("contreact: ")
    assert not CLASS_NAME.search(line), line
    said = re.sub(
        r"^run (\S+) failed: (.*); once that is fixed, `contreact resume \1( --storage \S+)?` "
        r"continues it$",
        r"\2",
        line,
    )
    assert any(p.match(said) for p in PATTERNS), f"not in docs/errors.md: {said}"
    return line


def test_a_5000_character_run_id_is_cut_in_the_line(sqlite_backend: Backend) -> None:
    from contreact.checkpoints.engines import dispose_engines, engine_for

    engine_for(sqlite_backend.storage())  # a storage with no runs: the run is what is missing
    dispose_engines()
    result = cli_in_process(sqlite_backend, "status", "a" * 5000)
    assert result.returncode == 2
    line = line_of(result)
    # The storage the hint names (`contreact list --storage DIR`) is not the run id's.
    hint = re.sub(r" --storage \S+`", "`", line)
    assert "(5,000 characters)" in line and len(hint) < 300, line


def test_a_refused_5000_character_run_id_in_a_config_is_cut(
    tmp_path: Path, sqlite_backend: Backend
) -> None:
    config = write_config(tmp_path / "c.yaml", sqlite_backend, run_id="!" * 5000)
    result = cli_in_process(sqlite_backend, "run", str(config))
    assert result.returncode == 2
    line = line_of(result)
    assert "c.yaml" in line and "run_id" in line and len(line) < 600, line


def test_postgres_down_names_the_database_without_its_password(tmp_path: Path) -> None:
    backend = Backend(
        "postgres", tmp_path / "runs", "postgresql+psycopg://u:hunter2@127.0.0.1:9/db"
    )
    result = cli_in_process(backend, "list")
    assert result.returncode == 1
    line = line_of(result)
    assert "postgresql+psycopg://u:***@127.0.0.1:9/db cannot be reached" in line, line
    assert "hunter2" not in line and "--storage" in line


def test_bad_yaml_and_an_unknown_key_name_the_file(tmp_path: Path, sqlite_backend: Backend) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("run_id: [a\nmodel: : b\n", encoding="utf-8")
    line = line_of(cli_in_process(sqlite_backend, "run", str(bad)))
    assert str(bad) in line and "line 2" in line
    typo = write_config(tmp_path / "typo.yaml", sqlite_backend, cycels=3)
    line = line_of(cli_in_process(sqlite_backend, "run", str(typo)))
    assert "unknown key `cycels` (did you mean `cycles`?)" in line


def test_ollama_down_says_where_and_only_debug_names_the_client_exception(
    tmp_path: Path, sqlite_backend: Backend
) -> None:
    server = StubServer().start()
    url = server.url
    server.stop()
    ollama = {"host": url, "retries": 1, "retry_budget_s": 3}
    config = write_config(tmp_path / "c.yaml", sqlite_backend, cycles=1, ollama=ollama)
    line = line_of(cli_in_process(sqlite_backend, "run", str(config)))
    assert f"cannot reach Ollama at {url}" in line
    config = write_config(tmp_path / "d.yaml", sqlite_backend, run_id="run-2", ollama=ollama)
    # A process of its own: logging is set up by the command, not by the test's logger.
    debug = cli(sqlite_backend, "--debug", "run", str(config))
    assert "httpx.ConnectError" in debug.stderr  # the retry warning, for a bug report


@pytest.mark.parametrize("case", ["content: null", "non-JSON chunk", "args: 10,000-deep nesting"])
def test_an_unreadable_answer_says_what_was_unreadable(
    tmp_path: Path, sqlite_backend: Backend, case: str
) -> None:
    inner = StubServer.from_scenario({"agent": "scripted", "script": {}}).start()
    fuzz = FuzzServer([c for c in CASES if c.name == case], inner).start()
    url = fuzz.url
    try:
        ollama = {"host": url, "retries": 0}
        config = write_config(tmp_path / "c.yaml", sqlite_backend, cycles=1, ollama=ollama)
        result = cli_in_process(sqlite_backend, "run", str(config))
    finally:
        fuzz.stop()
        inner.stop()
    assert result.returncode == 1
    line = line_of(result)
    assert f"Ollama at {url} sent an answer for model 'stub-model' that cannot be read" in line
    assert "validation error for" not in line, line
