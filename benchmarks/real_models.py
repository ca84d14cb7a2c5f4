"""Real small models on this machine: demo wall time, format health, determinism.

Prints, per shipped model (needs the `real` extra):
* the wall time of `contreact demo --model M` (3 cycles, a fresh process: model load,
  prompt rendering, generation, checkpoints), and from its events the cycles, steps,
  calls parsed, truncations, echoes and invented turns;
* whether llama.cpp on CPU gives the same answer to the same seeded request at
  temperature 0 and 0.6, across two server processes' worth of fresh loads and with the
  prompt cache disturbed between repeats (what a resumed run meets).

Usage: `python benchmarks/real_models.py [MODEL ...]`.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from contreact.analysis.format_health import run_health
from contreact.checkpoints.engines import engine_for
from contreact.checkpoints.events import read_events
from contreact.checkpoints.storage import resolve_storage
from contreact.nodes.prompts import system_text
from contreact.stub.real import SHIPPED_MODELS, build_real_server

ROOT = Path(__file__).resolve().parent.parent


def demo(model: str) -> None:
    """Time `contreact demo --model` and print the run's format health."""
    with tempfile.TemporaryDirectory() as tmp:
        started = time.monotonic()
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "contreact",
                "--data-dir",
                tmp,
                "demo",
                "--model",
                model,
                "--run-id",
                "bench",
                "--quiet",
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
        wall = time.monotonic() - started
        if done.returncode != 0:
            print(f"{model}: demo failed ({done.returncode}): {done.stderr.strip()[-300:]}")
            return
        events = read_events(engine_for(resolve_storage(Path(tmp), None)), "bench")
        health = run_health(model, events)
        cycles = sum(1 for e in events if e["event_type"] == "CYCLE_END")
        model_s = sum(
            float(e["payload"].get("duration_s") or 0)
            for e in events
            if e["event_type"] == "LLM_INVOCATION"
        )
        print(
            f"{model}: demo {wall:.1f} s wall ({model_s:.1f} s in model calls), {cycles} cycles, "
            f"{health.steps} steps, {health.calls_parsed} calls parsed, "
            f"{health.truncations} truncations, {health.echoes} echoes, "
            f"{health.invented_turns} invented turns, {health.unreadable_markup} unreadable"
        )


def determinism(model: str) -> None:
    """Same seeded request, 2 fresh loads x 2 repeats (cache disturbed before the second)."""
    messages = [
        {"role": "system", "content": system_text([], text_tools=True)},
        {"role": "user", "content": "Cycle 1 begins."},
    ]
    other = [{"role": "user", "content": "Name three rivers."}]
    answers: dict[float, list[str]] = {0.0: [], 0.6: []}
    for _ in range(2):
        with build_real_server(model).start() as server:
            for temperature in answers:
                for repeat in range(2):
                    if repeat:
                        httpx.post(
                            f"{server.url}/api/chat",
                            json={
                                "model": model,
                                "messages": other,
                                "stream": False,
                                "options": {"seed": 1, "num_predict": 8},
                            },
                            timeout=600,
                        )
                    body = {
                        "model": model,
                        "messages": messages,
                        "stream": False,
                        "options": {"seed": 42, "temperature": temperature, "num_predict": 96},
                    }
                    reply = httpx.post(f"{server.url}/api/chat", json=body, timeout=600).json()
                    answers[temperature].append(reply["message"]["content"])
    for temperature, texts in answers.items():
        same = len(set(texts)) == 1
        print(
            f"{model}: seed 42, temperature {temperature}: "
            f"{'identical' if same else f'{len(set(texts))} different'} answers "
            "over 2 loads x 2 repeats (prompt cache disturbed before each repeat)"
        )


def main(argv: list[str]) -> int:
    """Print the figures for the models named (default: both shipped models)."""
    for model in argv or list(SHIPPED_MODELS):
        demo(model)
        determinism(model)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
