"""What real small models write, handled and visible: each case is a real answer.

The answers were captured from Gemma 3 270M and SmolLM2-135M behind the real backend
(`benchmarks/capture/real_capture.py`, files in tests/data/real_captures/ named model__prompt).
Each is replayed here by the scripted stub under the model's name, without the `tools`
capability, so the CLI runs in text-tool mode exactly as against the real model; only
the sampling is taken out of the loop.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from contreact.nodes.answer_health import answer_flags, cut_invented_turn, echo_fraction, is_echo
from contreact.nodes.prompts import system_text
from support.backends import Backend
from support.cli import cli_in_process
from support.paths import DATA
from support.runs import read_log, write_config
from support.stub import scripted_stub

CAPTURES = DATA / "real_captures"


def captured(name: str) -> dict[str, Any]:
    """One capture: model, prompt, options, the answer's content and done_reason."""
    return json.loads((CAPTURES / f"{name}.json").read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def replay(
    tmp_path: Path, backend: Backend, model: str, script: dict[int, list[Any]], cycles: int = 1
) -> list[dict[str, Any]]:
    """Run the CLI against the scripted answers served as `model` (no tools capability)."""
    with scripted_stub(script, models=[]) as server:
        server.add_model(model, capabilities=["completion"])
        config = write_config(
            tmp_path / "c.yaml",
            backend,
            model=model,
            cycles=cycles,
            tools="auto",
            ollama={"host": server.url},
            similarity={"enabled": False},
        )
        done = cli_in_process(backend, "run", str(config))
        assert done.returncode == 0, done.stderr + done.stdout
        report = cli_in_process(backend, "report", "run-1", "--out", str(tmp_path / "report"))
        assert report.returncode == 0, report.stderr
        replay.requests = server.requests()  # type: ignore[attr-defined]
    return read_log(backend, "run-1")


def of(log: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e["payload"] for e in log if e["event_type"] == kind]


def health_line(tmp_path: Path) -> str:
    text = (tmp_path / "report" / "report.md").read_text(encoding="utf-8")
    section = text.split("## Format health", 1)[1]
    return next(line for line in section.splitlines() if line.startswith("- "))


def test_a_truncated_answer_is_flagged_on_its_event_its_cycle_and_in_the_report(
    tmp_path: Path, sqlite_backend: Backend
) -> None:
    # Gemma 3 270M, verbatim system prompt, no tools: ran to num_predict=192.
    cap = captured("gemma3-270m__no-tools-cycle1")
    assert cap["done_reason"] == "length"
    entry = {"content": cap["content"], "done_reason": "length"}
    log = replay(tmp_path, sqlite_backend, cap["model"], {1: [entry]})
    (call,) = of(log, "LLM_INVOCATION")
    assert call["done_reason"] == "length"
    assert "truncated" in call["flags"]
    (end,) = of(log, "CYCLE_END")
    assert "truncated" in end["flags"]
    assert "1 truncations" in health_line(tmp_path)
    assert health_line(tmp_path).startswith("- gemma3:270m (1 run): 1 steps")


def test_a_reflection_echoing_the_system_prompt_is_flagged(
    tmp_path: Path, sqlite_backend: Backend
) -> None:
    # Gemma 3 270M, contreact's text-tool prompt: its "reflection" is the prompt, reworded
    # in places ("You have no external tasks ..."); replayed as a normal stop, so the echo
    # is the only thing wrong with it.
    cap = captured("gemma3-270m__text-tools-cycle1")
    log = replay(tmp_path, sqlite_backend, cap["model"], {1: [{"content": cap["content"]}]})
    (end,) = of(log, "CYCLE_END")
    assert end["flags"] == ["echoed_prompt"]
    assert "1 echoes" in health_line(tmp_path)


def test_an_answer_that_only_repeats_the_opening_turn_is_an_echo(
    tmp_path: Path, sqlite_backend: Backend
) -> None:
    # SmolLM2-135M given a ReAct format: it answered "Cycle 1 begins." and stopped.
    cap = captured("smollm2-135m__react-placeholders")
    assert cap["content"] == "Cycle 1 begins."
    log = replay(tmp_path, sqlite_backend, cap["model"], {1: [{"content": cap["content"]}]})
    (end,) = of(log, "CYCLE_END")
    assert end["final_reflection"] == "Cycle 1 begins."
    assert end["flags"] == ["echoed_prompt"]


def test_an_own_reflection_is_not_an_echo() -> None:
    # SmolLM2's first reflection under the text-tool prompt is its own words.
    cap = captured("smollm2-135m__text-tools-cycle1")
    sources = [system_text([], text_tools=True), "Cycle 1 begins."]
    assert echo_fraction(cap["content"], sources) < 0.2
    assert not is_echo(cap["content"], sources)
    assert answer_flags(cap, 1) == []


def test_an_invented_turn_is_cut_off_the_reflection_and_flagged(
    tmp_path: Path, sqlite_backend: Backend
) -> None:
    # Gemma 3 270M, verbatim system prompt: it goes on to open "Cycle 2" itself.
    cap = captured("gemma3-270m__no-tools-cycle1")
    own, invented = cap["content"].split("\nCycle 2 begins.", 1)
    log = replay(
        tmp_path,
        sqlite_backend,
        cap["model"],
        {1: [{"content": cap["content"], "done_reason": "length"}], 2: ["My own note."]},
        cycles=2,
    )
    (first, _) = of(log, "LLM_INVOCATION")
    assert "invented_turn" in first["flags"]
    assert first["response"]["content"] == cap["content"]  # the log keeps what was said
    end = of(log, "CYCLE_END")[0]
    assert end["final_reflection"] == own.rstrip()
    assert "invented_turn" in end["flags"]
    assert "1 invented turns" in health_line(tmp_path)
    # The next cycle's prompt carries the cut note, never the invented cycle.
    system = replay.requests[-1]["body"]["messages"][0]["content"]  # type: ignore[attr-defined]
    assert own.strip().splitlines()[-1] in system
    assert invented.strip().splitlines()[0] not in system


def test_an_invented_next_cycle_after_a_note_is_cut() -> None:
    # SmolLM2-135M in cycle 3 of the real demo: a note, then 'Cycle 4 begins: "..."'.
    cap = captured("smollm2-135m__demo-cycle3")
    cut = cut_invented_turn(cap["content"], cap["cycle"])
    assert cut.marker == "Cycle 4 begins"
    assert cut.text.endswith("aren't in my mind right now.\"")
    assert answer_flags(cap, cap["cycle"]) == ["invented_turn"]


def test_echoed_placeholders_are_never_dispatched_and_get_the_corrective_turn(
    tmp_path: Path, sqlite_backend: Backend
) -> None:
    # Gemma 3 270M given a ReAct format with placeholders echoes "Action: the tool name".
    cap = captured("gemma3-270m__react-placeholders")
    assert "Action: the tool name\nAction Input: the argument as JSON" in cap["content"]
    script = {1: [{"content": cap["content"], "done_reason": "length"}, "A note of my own."]}
    log = replay(tmp_path, sqlite_backend, cap["model"], script)
    assert all(c["tool_name"] != "the tool name" for c in of(log, "TOOL_CALL"))
    first, second = replay.requests  # type: ignore[attr-defined]
    corrective = second["body"]["messages"][-1]
    assert corrective["role"] == "user"
    assert "No tool was run" in corrective["content"]
    assert "Available tools" in corrective["content"]
    (end,) = of(log, "CYCLE_END")
    assert end["final_reflection"] == "A note of my own."


def test_prose_that_mentions_turns_is_not_an_invented_turn() -> None:
    # From the Gemma text-tool capture: "inside <tool_response> tags" mid-sentence.
    cap = captured("gemma3-270m__text-tools-cycle1")
    assert "<tool_response> tags" in cap["content"]
    assert cut_invented_turn(cap["content"], 1).marker is None
    assert cut_invented_turn("I told the user: hello", 1).marker is None
    assert cut_invented_turn("Cycle 1 begins.", 1).marker is None
    assert cut_invented_turn("Note.\nUser: what next?", 1).marker == "User:"
    assert cut_invented_turn("Note.<start_of_turn>user\nhi", 1).text == "Note."
