"""Provenance is recorded with the run, and the report's methods come from that record alone.

A run is made against the stub, the model is "pulled again" (another digest) and the run is
extended, then the stub stops: the report, made with no host to ask, carries the whole
record (digest and its change, server and versions, options, hashes, dates) and says the
run was made against the stub; a fork of it records and is reported from its own start.
kill -9 right after RUN_START committed, and right after a resume's PROVENANCE committed, on
both backends: the replayed step reuses its record (one RUN_START, the host asked once for
it), and every drive makes exactly one record of its own. A host whose metadata endpoints
fail: the record says `unavailable` and why, and the run and its report go on.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from contreact import __version__
from contreact.analysis.report.methods import collect_methods
from contreact.checkpoints.engines import engine_for
from contreact.checkpoints.registry import get_run
from contreact.config import parse_config
from contreact.engine.runner import fork_run, resume_run, start_run
from contreact.stub import StubServer
from contreact.stub.model_cards import STUB_DIGEST_PREFIX, stub_card
from contreact.stub.ollama_api import ServedModel
from support.backends import Backend
from support.cli import cli, cli_in_process
from support.runs import read_log, write_config

PULLED_AGAIN = "9" * 64
"""The digest the model has after it is pulled again between the run and its extension."""


@dataclass
class Made:
    backend: Backend
    url: str
    digest: str
    """The model's digest as the stub listed it when the run started."""
    log: list[dict[str, Any]]
    fork_log: list[dict[str, Any]]
    markdown: str
    html: str
    stderr: str


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Made]:
    root = tmp_path_factory.mktemp("provenance")
    backend = Backend("sqlite", root / "runs")
    storage = backend.storage()
    with StubServer(models=["stub-model"]).start() as server:
        config = parse_config(
            {
                "run_id": "p1",
                "model": "stub-model",
                "cycles": 2,
                "model_options": {"temperature": 0.3, "top_k": 17},
                "ollama": {"host": server.url, "timeout_s": 20, "retries": 2},
                "limits": {"max_steps_per_cycle": 7},
                "user_turn": "Cycle {cycle} starts now.",
                "storage": backend.storage_yaml(),
            },
            "test",
        )
        assert start_run(config, storage).status == "completed"
        tags = httpx.get(f"{server.url}/api/tags", timeout=5).json()["models"]
        card = stub_card(ServedModel("stub-model:latest", ("completion", "tools")))
        server.add_model("stub-model", card=dataclasses.replace(card, digest=PULLED_AGAIN))
        assert resume_run("p1", storage, extra_cycles=1).status == "completed"
        fork = fork_run("p1", storage, at_cycle=1, new_run_id="p1-fork", cycles=2)
        assert fork.status == "completed"
        url = server.url
    # Every host is down now: nothing answers where the stub was.
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"{url}/api/version", timeout=2)
    out = root / "report"
    result = cli_in_process(backend, "report", "p1", "--out", str(out))
    assert result.returncode == 0, result.stderr + result.stdout
    yield Made(
        backend,
        url,
        next(m["digest"] for m in tags if m["name"] == "stub-model:latest"),
        read_log(backend, "p1"),
        read_log(backend, "p1-fork"),
        (out / "report.md").read_text(encoding="utf-8"),
        (out / "report.html").read_text(encoding="utf-8"),
        result.stderr,
    )


def records(log: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (e["event_type"], e["payload"])
        for e in log
        if e["event_type"] in ("RUN_START", "PROVENANCE")
    ]


def test_run_start_records_what_the_run_was_made_with(made: Made) -> None:
    (kind, start), (_, extension) = records(made.log)
    assert kind == "RUN_START"
    record = start["provenance"]
    assert record["server"] == "stub" and record["stub_version"] == __version__
    assert record["ollama_version"] == "0.12.6" and record["host"] == made.url
    assert record["digest"] == made.digest and made.digest.startswith(STUB_DIGEST_PREFIX)
    assert record["details"] == {
        "family": "stub",
        "parameter_size": "8B",
        "quantization_level": "Q4_K_M",
        "format": "gguf",
    }
    assert len(record["template_sha256"]) == 64
    assert record["options"] == {"temperature": 0.3, "top_k": 17, "seed": 42, "num_ctx": 8192}
    assert record["seed"] == 42
    assert set(record["versions"]) == {
        "contreact", "langgraph", "langchain-ollama", "langchain-core", "ollama", "python",
        "platform",
    }  # fmt: skip
    assert all(v and v != "not installed" for v in record["versions"].values())
    assert set(record["hashes"]) == {"system_prompt", "tool_schemas", "settings"}
    assert "unavailable" not in record


def test_an_extension_records_again_and_sees_the_new_digest(made: Made) -> None:
    (_, start), (kind, extension) = records(made.log)
    assert kind == "PROVENANCE" and extension["occasion"] == "extension"
    assert extension["provenance"]["digest"] == PULLED_AGAIN
    assert extension["provenance"]["hashes"] == start["provenance"]["hashes"]


def test_a_report_made_with_the_host_down_carries_the_full_record(made: Made) -> None:
    md = made.markdown
    record = records(made.log)[0][1]["provenance"]
    methods = md[md.index("## Methods") :]
    # The digest as recorded, and its change at the extension (cycle 3).
    assert made.digest in methods
    assert "changed at cycle 3 (extension, " in methods and f"-> {PULLED_AGAIN}" in methods
    # The server, and that it was the stub.
    assert f"contreact stub {__version__} (speaking Ollama 0.12.6)" in methods
    assert "Run p1 was made against contreact's bundled stub" in methods
    assert "| p1 | stub |" in methods
    # Options, library versions, hashes.
    assert "top_k=17" in methods and "| 0.3 |" in methods
    for name, version in record["versions"].items():
        assert f"{name} {version}" in methods
    for sha in record["hashes"].values():
        assert sha[:12] in methods
    assert record["template_sha256"][:12] in methods
    # Dates, limits, user turn, operator replies.
    ends = [e["timestamp"] for e in made.log if e["event_type"] == "RUN_END"]
    assert len(ends) == 2  # the run's, then its extension's: it ended with the latter
    assert f"| {record['recorded_at']} | {ends[-1]} |" in methods
    assert "max_steps_per_cycle=7" in methods
    assert "User turn: 'Cycle {cycle} starts now.'" in methods
    assert "Operator replies: auto: " in methods
    assert "no host was asked when this report was made" in methods
    assert "unavailable" not in methods
    # The HTML page says the same.
    assert (
        PULLED_AGAIN in made.html and "was made against contreact&#x27;s bundled stub" in made.html
    )


def test_a_fork_records_its_own_start_and_is_reported_from_it(made: Made) -> None:
    (_, inherited), (kind, own) = records(made.fork_log)
    assert kind == "RUN_START" and own["forked_from"] == "p1"
    # The parent's start is its history; the fork began later, with the model pulled again.
    assert inherited["provenance"]["digest"] == made.digest
    assert own["provenance"]["digest"] == PULLED_AGAIN and own["provenance"]["server"] == "stub"
    engine = engine_for(made.backend.storage())
    (fork,) = collect_methods(engine, [get_run(engine, "p1-fork")]).runs
    assert [r.occasion for r in fork.records] == ["fork"]
    assert fork.digest == PULLED_AGAIN and fork.digest_changes() == []
    assert fork.started == own["provenance"]["recorded_at"]


def test_kills_after_a_record_committed_replay_it_and_every_drive_records_once(
    tmp_path: Path, backend: Backend
) -> None:
    with StubServer().start() as server:
        config = write_config(tmp_path / "c.yaml", backend, cycles=1, ollama={"host": server.url})
        asked = []
        for args, point in (
            (["run", str(config)], "after-commit:run:start"),
            (["resume", "run-1"], "after-commit:run:provenance:0"),
            (["resume", "run-1"], None),
        ):
            env = {"CONTREACT_FAILPOINTS": point} if point else None
            done = cli(backend, *args, env=env)
            assert done.returncode == (-9 if point else 0), done.stderr
            asked.append(len(server.requests("/api/version")))
    log = read_log(backend, "run-1")
    assert [(k, p.get("occasion")) for k, p in records(log)] == [
        ("RUN_START", None),
        ("PROVENANCE", "resume"),
        ("PROVENANCE", "resume"),
    ]
    # Each drive asked the host once, for its own record; the replayed first step (its
    # RUN_START committed before the kill) asked nothing again.
    assert asked == [1, 2, 3]
    assert [e["event_type"] for e in log].count("CYCLE_END") == 1


def test_a_host_that_cannot_answer_show_is_recorded_unavailable_and_the_run_runs(
    tmp_path: Path, sqlite_backend: Backend
) -> None:
    def broken(h: Any, path: str, raw: bytes) -> None:
        h.send_json(500, {"error": "metadata store is down"})

    with StubServer().start() as server:
        # Chat works; the metadata endpoints fail (an Ollama whose model store is broken).
        server._show = broken  # type: ignore[method-assign]
        server._tags = broken  # type: ignore[method-assign]
        config = write_config(
            tmp_path / "c.yaml", sqlite_backend, cycles=1, ollama={"host": server.url}
        )
        done = cli_in_process(sqlite_backend, "run", str(config))
        assert done.returncode == 0, done.stderr
        out = tmp_path / "report"
        report = cli_in_process(sqlite_backend, "report", "run-1", "--out", str(out))
    assert report.returncode == 0, report.stderr
    (start,) = [p for k, p in records(read_log(sqlite_backend, "run-1")) if k == "RUN_START"]
    record = start["provenance"]
    assert record["server"] == "stub" and record["digest"] == "unavailable"
    assert record["unavailable"] == "/api/show answered HTTP 500; /api/tags answered HTTP 500"
    assert record["ollama_version"] == "0.12.6" and record["options"]["seed"] == 42
    markdown = (out / "report.md").read_text(encoding="utf-8")
    methods = markdown[markdown.index("## Methods") :]
    assert "| run-1 | stub-model | – | 42 |" in methods and "| unavailable |" in methods
    assert "/api/show answered HTTP 500; /api/tags answered HTTP 500" in methods
