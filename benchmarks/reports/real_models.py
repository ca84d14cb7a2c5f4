"""Real small models on this machine: demo wall time, format health, determinism.

Prints, per shipped model (needs the `real` extra):
* the wall time of `contreact demo --model M` (3 cycles, a fresh process: model load,
  prompt rendering, generation, checkpoints), and from its events the cycles, steps,
  calls parsed, truncations, echoes and invented turns;
* whether llama.cpp on CPU gives the same answer to the same seeded request at
  temperature 0 and 0.6, across two server processes' worth of fresh loads and with the
  prompt cache disturbed between repeats (what a resumed run meets).

With `--modes`, instead: each model runs 3 cycles in text and in constrained tool mode
(`tools: {mode: constrained}`), same seed, and prints side by side the share of steps
with a parseable tool call, the steps parsed at all (a call or a final answer), memory
writes per cycle, memory-tool calls and truncations.

Usage: `python benchmarks/reports/real_models.py [--modes] [MODEL ...]`.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import yaml

from contreact.analysis.format_health import run_health
from contreact.checkpoints.engines import engine_for
from contreact.checkpoints.event_store import read_events
from contreact.checkpoints.storage import resolve_storage
from contreact.cli.runs import real_demo_settings
from contreact.nodes.prompts import system_text
from contreact.stub.real import SHIPPED_MODELS, build_real_server
from contreact.text.toolcalls import FinalAnswer, ToolCalls, parse_response
from contreact.tools.registry import MEMORY_TOOLS, PARAMETER_SCHEMAS

ROOT = Path(__file__).resolve().parents[2]


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


def run_in_mode(model: str, url: str, mode: str, cycles: int) -> tuple[list[Any], float]:
    """One run of `cycles` cycles in tool mode `mode` against the served model: its events."""
    with tempfile.TemporaryDirectory() as tmp:
        settings = real_demo_settings(model)
        settings["ollama"]["host"] = url
        config = {**settings, "run_id": "bench", "cycles": cycles, "tools": {"mode": mode}}
        path = Path(tmp) / "c.yaml"
        path.write_text(yaml.safe_dump(config), encoding="utf-8")
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "contreact", "--data-dir", tmp, "run", str(path), "--quiet"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
        wall = time.monotonic() - started
        if done.returncode != 0:
            raise RuntimeError(f"{model} {mode}: run failed: {done.stderr.strip()[-300:]}")
        return read_events(engine_for(resolve_storage(Path(tmp), None)), "bench"), wall


def mode_figures(events: list[Any], cycles: int) -> str:
    """One line: calls, parsed steps, writes per cycle, memory-tool calls, truncations."""
    calls = [e["payload"] for e in events if e["event_type"] == "LLM_INVOCATION"]
    outcomes = [
        parse_response(c["response"]["content"], c["response"]["tool_calls"], PARAMETER_SCHEMAS)
        for c in calls
    ]
    with_call = sum(
        1 for o in outcomes if isinstance(o, ToolCalls) and any(c.error is None for c in o.calls)
    )
    parsed = sum(1 for o in outcomes if isinstance(o, ToolCalls | FinalAnswer))
    ran = [
        e
        for e in events
        if e["event_type"] == "TOOL_CALL"
        and not e["payload"].get("error")
        and not e["payload"].get("refused")
    ]
    writes = Counter(e["cycle_number"] for e in ran if e["payload"]["tool_name"] == "write")
    memory = Counter(
        e["payload"]["tool_name"] for e in ran if e["payload"]["tool_name"] in MEMORY_TOOLS
    )
    truncated = sum(1 for c in calls if c.get("done_reason") == "length")
    steps = len(calls)
    return (
        f"{steps} steps, {with_call}/{steps} with a parseable tool call "
        f"({100 * with_call / max(steps, 1):.0f} %), {parsed}/{steps} parsed, "
        f"writes per cycle {[writes.get(c, 0) for c in range(1, cycles + 1)]}, "
        f"memory tools {dict(sorted(memory.items())) or 'none'}, {truncated} truncations"
    )


def modes(model: str, cycles: int = 3) -> None:
    """Text and constrained tool mode side by side, same seed, one server for both."""
    with build_real_server(model).start() as server:
        for mode in ("text", "constrained"):
            events, wall = run_in_mode(model, server.url, mode, cycles)
            print(f"{model} {mode:>11}: {mode_figures(events, cycles)}; {wall:.0f} s wall")


def main(argv: list[str]) -> int:
    """Print the figures for the models named (default: both shipped models)."""
    side_by_side = "--modes" in argv
    models = [a for a in argv if a != "--modes"] or list(SHIPPED_MODELS)
    for model in models:
        if side_by_side:
            modes(model)
            continue
        demo(model)
        determinism(model)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
