"""Structured reflections end to end: the CLI against the stub, on SQLite.

With `reflection: {format: json}` each cycle's note is one JSON object with the schema's
fields, stored as canonical JSON, its fields in CYCLE_END and shown by the report; a
malformed answer gets a corrective turn naming what is wrong, within the cycle's budget.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from contreact.nodes.prompts import REFLECTION_FORMAT_HEADING, SYSTEM_PROMPT
from contreact.stub import StubServer
from contreact.text.reflection_format import correction, prose_of
from contreact.text.similarity import lexical_scores
from support.backends import Backend
from support.cli import cli_in_process
from support.paths import SCENARIOS
from support.runs import outcome, read_log, write_config


def system_prompts(server: StubServer) -> list[str]:
    return [r["body"]["messages"][0]["content"] for r in server.requests()]


def cycle_ends(backend: Backend, run_id: str) -> list[dict[str, Any]]:
    return [e["payload"] for e in read_log(backend, run_id) if e["event_type"] == "CYCLE_END"]


def test_a_json_run_stores_structured_reflections(tmp_path: Path, sqlite_backend: Backend) -> None:
    with StubServer().start() as server:
        config = write_config(tmp_path / "json.yaml", sqlite_backend, reflection={"format": "json"})
        done = cli_in_process(sqlite_backend, "run", str(config), "--host", server.url)
        assert done.returncode == 0, done.stderr
        # A resumed (extended) run keeps the format: the schema is in its stored config.
        more = cli_in_process(sqlite_backend, "resume", "run-1", "--cycles", "1")
        json_prompts = system_prompts(server)
    assert more.returncode == 0, more.stderr
    cycles, _, _ = outcome(sqlite_backend, "run-1")
    assert [c[0] for c in cycles] == [1, 2, 3, 4]
    ends = cycle_ends(sqlite_backend, "run-1")
    for (_, note, flags), end in zip(cycles, ends, strict=True):
        fields = json.loads(note)
        assert list(fields) == ["reflection", "plan"] and all(fields.values()), note
        assert note == json.dumps(fields, ensure_ascii=False), "canonical JSON is stored"
        assert end["final_reflection"] == note and end["reflection_fields"] == fields
        assert "reflection_invalid" not in flags
    # The simulated agent writes its plan sentence into `plan`, the rest into `reflection`.
    assert ends[0]["reflection_fields"]["plan"].startswith(("Next", "My plan"))

    # The similarity monitor compared the notes' words, not the JSON they are written in.
    (third,) = [
        e["payload"]
        for e in read_log(sqlite_backend, "run-1")
        if e["event_type"] == "SIMILARITY" and e["cycle_number"] == 3
    ]
    notes = [(c, prose_of(n)) for c, n, _ in cycles]
    assert third["method"].startswith("lexical")
    assert [(s["cycle"], s["score"]) for s in third["scores"]] == lexical_scores(
        notes[2][1], notes[:2]
    )

    # Every call was told the format, after the verbatim prompt; later cycles see the
    # earlier notes as stored.
    told = SYSTEM_PROMPT + "\n\n" + REFLECTION_FORMAT_HEADING
    assert json_prompts and all(p.startswith(told) for p in json_prompts)
    assert f"Cycle 1: {cycles[0][1]}" in json_prompts[-1]

    # The report shows the fields.
    report = cli_in_process(sqlite_backend, "report", "run-1", "--out", str(tmp_path / "rep"))
    assert report.returncode == 0, report.stderr
    page = (tmp_path / "rep" / "report.html").read_text(encoding="utf-8")
    plan = ends[2]["reflection_fields"]["plan"].replace("'", "&#x27;")
    assert f'<p class="note">Plan</p><div class="reflection">{plan}</div>' in page
    markdown = (tmp_path / "rep" / "report.md").read_text(encoding="utf-8")
    assert "## Structured reflections" in markdown
    assert "| Cycle | Reflection | Plan |" in markdown


def test_a_text_run_is_not_told_any_format(tmp_path: Path, sqlite_backend: Backend) -> None:
    with StubServer().start() as server:
        config = write_config(tmp_path / "text.yaml", sqlite_backend, cycles=1)
        done = cli_in_process(sqlite_backend, "run", str(config), "--host", server.url)
        prompts = system_prompts(server)
    assert done.returncode == 0, done.stderr
    assert prompts and all(p == SYSTEM_PROMPT for p in prompts)
    (end,) = cycle_ends(sqlite_backend, "run-1")
    assert "reflection_fields" not in end
    assert not end["final_reflection"].startswith("{")


def test_a_malformed_reflection_gets_a_corrective_turn(
    tmp_path: Path, sqlite_backend: Backend
) -> None:
    with StubServer.from_scenario(SCENARIOS / "json-reflection.yaml").start() as server:
        config = write_config(
            tmp_path / "c.yaml", sqlite_backend, cycles=2, reflection={"format": "json"}
        )
        done = cli_in_process(sqlite_backend, "run", str(config), "--host", server.url)
        bodies = [r["body"]["messages"] for r in server.requests()]
    assert done.returncode == 0, done.stderr
    cycles, memory, _ = outcome(sqlite_backend, "run-1")
    assert memory == {"plan": "map the tides"}
    assert cycles[0][1] == (
        '{"reflection": "I stored a plan under the key plan.", "plan": "Read the key plan back."}'
    )
    assert cycles[1][1] == '{"reflection": "I only thought this time.", "plan": "3"}'

    # Cycle 1: tool call, cut-off JSON, object without `plan`, valid object: four calls,
    # and the two corrective turns say what was wrong.
    cycle_1 = [b for b in bodies if b[1]["content"] == "Cycle 1 begins."]
    assert len(cycle_1) == 4
    turns = [m["content"] for m in cycle_1[-1] if m["role"] == "user"]
    assert turns[1].startswith(correction("it is not valid JSON")[:40])
    assert "not valid JSON" in turns[1]
    assert "missing required field(s): plan" in turns[2]
    ends = cycle_ends(sqlite_backend, "run-1")
    assert ends[0]["metrics"]["errors"] == 2 and ends[0]["metrics"]["steps"] == 4
    assert ends[0]["reflection_fields"] == {
        "reflection": "I stored a plan under the key plan.",
        "plan": "Read the key plan back.",
    }


def test_a_cycle_out_of_steps_keeps_the_invalid_note_flagged(
    tmp_path: Path, sqlite_backend: Backend
) -> None:
    with StubServer.from_scenario(SCENARIOS / "json-reflection.yaml").start() as server:
        config = write_config(
            tmp_path / "c.yaml",
            sqlite_backend,
            cycles=1,
            reflection={"format": "json"},
            limits={"max_steps_per_cycle": 2},
        )
        done = cli_in_process(sqlite_backend, "run", str(config), "--host", server.url)
    assert done.returncode == 0, done.stderr
    cycles, _, _ = outcome(sqlite_backend, "run-1")
    note, flags = cycles[0][1], cycles[0][2]
    assert note == '{"reflection": "I stored a plan under the key plan.", "plan":'
    assert "reflection_invalid" in flags and "step_budget_exhausted" in flags
    (end,) = cycle_ends(sqlite_backend, "run-1")
    assert "reflection_fields" not in end
