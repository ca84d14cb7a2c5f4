"""What a person at a terminal sees: batch progress live, the operator's prompt.

Through a pseudo-terminal, like tests/test_chat_pty.py: a 2-run batch shows each run's
cycle i/N moving in its live table, and the terminal operator policy stops the live
line, shows the agent's message and the prompt, echoes what is typed, and goes on.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from contreact.stub import StubServer
from support.backends import Backend
from support.cli import Terminal
from support.runs import write_config
from support.stub import scripted_stub

RUNS = ["pty.stub-model.r1", "pty.stub-model.r2"]


def test_batch_shows_each_cycle_of_each_run(tmp_path: Path, sqlite_backend: Backend) -> None:
    # 150 ms per model call: each cycle takes about a second, several live refreshes.
    with StubServer(latency_ms=150).start() as server:
        config = tmp_path / "batch.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "batch": "pty",
                    "models": ["stub-model"],
                    "replicates": 2,
                    "parallel": 2,
                    "cycles": 3,
                    "ollama": {"host": server.url},
                }
            ),
            encoding="utf-8",
        )
        term = Terminal(sqlite_backend, "batch", str(config))
        term.expect(r"batch pty: 2 runs, 2 at a time")
        term.expect(r"┃ run\s+┃ model\s+┃ cycle\s+┃ step\s+┃ status\s+┃ tok/s\s+┃ ETA")
        # The runs go in parallel and finish in either order: wait for the summary.
        term.expect(r"┃ run\s+┃ model\s+┃ status\s+┃ cycles", timeout=120)
        assert term.close(timeout=60) == 0
    screen = term.transcript
    for run in RUNS:
        assert re.search(rf"{re.escape(run)}: completed \(3 cycles\)", screen), run
    for run in RUNS:
        row = rf"│ {re.escape(run)}\s+│ stub-model\s+│ in {{}}/3\s+│ \d*\s+│ running\s+│"
        for cycle in (1, 2, 3):
            assert re.search(row.format(cycle), screen), f"{run} never showed cycle {cycle}/3"
    # After the first cycle the live table knows the pace: tokens/s and an ETA.
    assert re.search(r"│ in 2/3\s+│ \d+\s+│ running\s+│ [\d.]+\s+│ [\d.]+s", screen)


OPERATOR_CYCLE = {
    1: [
        {
            "tool_calls": [
                {
                    "name": "send_message_to_operator",
                    "arguments": {"message": "Should I study lichens or tides?"},
                }
            ]
        },
        {"content": "The operator chose tides; I will study tides."},
    ]
}


def test_terminal_operator_prompt_and_typed_reply(tmp_path: Path, sqlite_backend: Backend) -> None:
    with scripted_stub(OPERATOR_CYCLE, latency_ms=200) as server:
        config = write_config(
            tmp_path / "c.yaml",
            sqlite_backend,
            run_id="asked",
            cycles=1,
            ollama={"host": server.url},
            operator={"mode": "terminal"},
        )
        term = Terminal(sqlite_backend, "run", str(config))
        term.expect(r"Message from the agent: Should I study lichens or tides\?")
        prompt = term.expect(r"Your reply: ")
        waiting = term.seen
        term.send("Tides, please")
        term.expect(r"Tides, please")  # the terminal echoes what is typed
        echoed = term.seen
        term.expect(r"operator \(terminal\) → agent: Tides, please")
        term.expect(r"run asked completed")
        assert term.close() == 0
        sent = server.requests()[-1]["body"]["messages"]
    assert prompt is not None
    # While the prompt waits, the live line is stopped: nothing is drawn over it. (The run's
    # own next line may arrive in the same read as the echo; nothing may come before it.)
    before_next_line = echoed.split("operator (terminal)")[0]
    assert waiting.strip() == "" and before_next_line.strip() == "", (waiting, echoed)
    assert any(m.get("role") == "tool" and m.get("content") == "Tides, please" for m in sent), sent
