"""End to end: an agent that starts repeating itself gets the advisory in the next cycle only.

Six scripted cycles through `contreact run` against the stub: reflections 1-3 differ,
cycle 4 repeats cycle 3 (the first repetition) and 5-6 stay near-identical to it. The
monitor scores cycle 4's reflection after cycle 4, so the first advisory is in cycle 5's
system prompt; none before. Once with the stub's embedding model, once with no embedding
model (the lexical fallback must do the same and say so), on SQLite and PostgreSQL.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from contreact.checkpoints.cycles import cycle_records
from contreact.checkpoints.engines import engine_for
from contreact.nodes.similarity import HIGH_ADVISORY, MODERATE_ADVISORY
from support.backends import Backend
from support.cli import cli_in_process
from support.runs import read_log, write_config
from support.stub import scripted_stub

REFLECTIONS = {
    1: "Mapped prime gaps below one hundred; twin primes cluster early, then thin out.",
    2: "Drafted a haiku about tides: moon pulls water, shoreline breathes, gulls wait patiently.",
    3: "Lighthouse plan: index every stored key by theme, then link related notes with "
    "cross references.",
    4: "Lighthouse plan: index every stored key by theme, then link related notes with "
    "cross references again.",
    5: "Lighthouse plan again: index every stored key by theme, then link related notes "
    "with cross references.",
    6: "Lighthouse plan: index every stored key by theme, and then link related notes with "
    "cross references.",
}
SCRIPT: dict[int, list[Any]] = {c: [{"content": text}] for c, text in REFLECTIONS.items()}
# Cycle 5 takes two steps, to show the advisory stays for the whole cycle.
SCRIPT[5] = [{"tool_calls": [{"name": "list", "arguments": {}}]}, {"content": REFLECTIONS[5]}]
ADVISORY_MARKERS = (HIGH_ADVISORY.split(":")[0], MODERATE_ADVISORY.split(":")[0])


def requests_of_cycle(requests: list[dict[str, Any]], cycle: int) -> list[dict[str, Any]]:
    """The chat request bodies of one cycle, in order (its first user turn names it)."""
    found = []
    for req in requests:
        users = [m for m in req["body"]["messages"] if m["role"] == "user"]
        if users and users[0]["content"] == f"Cycle {cycle} begins.":
            found.append(req["body"])
    assert found, f"no request belongs to cycle {cycle}"
    return found


def advisories_in(system: str) -> int:
    return sum(system.count(marker) for marker in ADVISORY_MARKERS)


@pytest.mark.parametrize("method", ["embedding", "lexical"])
def test_repetition_gets_the_advisory_in_the_next_cycle_only(
    tmp_path: Path, backend: Backend, method: str
) -> None:
    embedding_model = "stub-embed" if method == "embedding" else None
    with scripted_stub(SCRIPT) as server:
        config = write_config(
            tmp_path / "run.yaml",
            backend,
            run_id="repeater",
            cycles=6,
            ollama={"host": server.url},
            similarity={"embedding_model": embedding_model, "moderate": 0.7, "high": 0.8},
        )
        result = cli_in_process(backend, "run", str(config))
        requests = server.requests()
    assert result.returncode == 0, result.stderr + result.stdout

    log = read_log(backend, "repeater")
    sims = {e["cycle_number"]: e["payload"] for e in log if e["event_type"] == "SIMILARITY"}
    assert sorted(sims) == [1, 2, 3, 4, 5, 6]
    assert sims[1]["method"] == "none" and sims[1]["scores"] == []
    expected_method = "embedding:stub-embed" if embedding_model else "lexical-char-tfidf"
    thresholds = (0.7, 0.8) if embedding_model else (0.26, 0.75)
    for cycle in range(2, 7):
        sim = sims[cycle]
        assert sim["method"] == expected_method
        if embedding_model is None:
            assert sim["note"] == "no embedding model configured"
        # Every earlier cycle is scored; the maximum is the largest of them.
        assert [s["cycle"] for s in sim["scores"]] == list(range(1, cycle))
        assert sim["compared"] == cycle - 1
        scores = [s["score"] for s in sim["scores"]]
        assert all(-1.0 <= s <= 1.0 for s in scores)
        assert sim["maximum"] == max(scores)
        # Thresholds per method: the configured embedding ones, or the lexical defaults.
        assert (sim["moderate"], sim["high"]) == thresholds
    assert [sims[c]["level"] for c in range(1, 7)] == ["none"] * 3 + ["high"] * 3
    assert sims[4]["most_similar_cycle"] == 3 and sims[4]["maximum"] > 0.8
    assert all(sims[c]["maximum"] < thresholds[0] for c in (2, 3))
    for cycle in (4, 5, 6):
        assert sims[cycle]["advisory"] == HIGH_ADVISORY.format(
            score=sims[cycle]["maximum"], cycle=sims[cycle]["most_similar_cycle"]
        )

    # What the model saw: the first request of each cycle.
    firsts = {c: requests_of_cycle(requests, c)[0]["messages"][0] for c in range(1, 7)}
    assert all(firsts[c]["role"] == "system" for c in firsts)
    for cycle in (1, 2, 3, 4):
        assert advisories_in(firsts[cycle]["content"]) == 0, f"advisory too early, cycle {cycle}"
    for cycle in (5, 6):
        system = firsts[cycle]["content"]
        # Exactly one advisory: the one the previous cycle left, at the end of the prompt;
        # cycle 4's does not linger into cycle 6.
        assert advisories_in(system) == 1
        assert system.endswith("\n\n" + sims[cycle - 1]["advisory"])
    # It stays for the whole cycle (cycle 5 made a tool call, then reflected).
    cycle5 = requests_of_cycle(requests, 5)
    assert len(cycle5) == 2
    assert all(r["messages"][0]["content"] == firsts[5]["content"] for r in cycle5)

    # The cycle records hold the maximum and the advisory the next cycle was given.
    records = {r.cycle: r for r in cycle_records(engine_for(backend.storage()), "repeater")}
    for cycle in range(2, 7):
        assert records[cycle].similarity == sims[cycle]["maximum"]
        assert records[cycle].advisory == sims[cycle]["advisory"]
