"""Capture real small-model answers for the flag tests (tests/data/real_captures/).

Each capture is one `/api/chat` request to a real model behind the stub
(`contreact.stub.real`) and the answer it got, stored with the model, the prompt's name,
the options and the date, so a test can replay the answer through the scripted stub.
Needs the `real` extra. Usage: `python benchmarks/capture/real_capture.py [NAME ...]`.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from contreact.nodes.prompts import SYSTEM_PROMPT, opening_turn, system_text
from contreact.stub.real import build_real_server

OUT = Path(__file__).resolve().parents[2] / "tests" / "data" / "real_captures"

REACT_PLACEHOLDERS = """To use a tool, answer in this format:
Thought: your reasoning
Action: the tool name
Action Input: the argument as JSON
The tools are write, read, list, delete, pattern_search and send_message_to_operator."""

OPTIONS = {"temperature": 0.6, "seed": 42, "num_ctx": 4096, "num_predict": 192}

PROMPTS: dict[str, tuple[str, list[dict[str, str]]]] = {
    # contreact's text-tool prompt, first step of cycle 1 (what `tools: auto` sends).
    "text-tools-cycle1": (
        "contreact's system prompt with the text-tool section, then 'Cycle 1 begins.'",
        [
            {"role": "system", "content": system_text([], text_tools=True)},
            {"role": "user", "content": opening_turn("Cycle {cycle} begins.", 1)},
        ],
    ),
    # The verbatim system prompt and no tools at all.
    "no-tools-cycle1": (
        "contreact's verbatim system prompt (no tools), then 'Cycle 1 begins.'",
        [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": "Cycle 1 begins."},
        ],
    ),
    # A ReAct format described with placeholders instead of an example.
    "react-placeholders": (
        "the verbatim system prompt plus a ReAct format given with placeholders",
        [
            {"role": "system", "content": SYSTEM_PROMPT + "\n\n" + REACT_PLACEHOLDERS},
            {"role": "user", "content": "Cycle 1 begins."},
        ],
    ),
}


def capture(model: str, name: str) -> dict[str, Any]:
    """Ask `model` the prompt `name` once; the capture record."""
    about, messages = PROMPTS[name]
    with build_real_server(model).start() as server:
        body = {"model": model, "messages": messages, "stream": False, "options": OPTIONS}
        answer = httpx.post(f"{server.url}/api/chat", json=body, timeout=600).json()
    return {
        "model": model,
        "prompt": name,
        "about": about,
        "captured": datetime.now(UTC).strftime("%Y-%m-%d"),
        "how": (
            "benchmarks/capture/real_capture.py: contreact.stub.real, llama-cpp-python 0.3 on CPU"
        ),
        "options": OPTIONS,
        "messages": messages,
        "content": answer["message"]["content"],
        "done_reason": answer["done_reason"],
        "eval_count": answer["eval_count"],
    }


def main(argv: list[str]) -> int:
    """Capture every model x prompt (or the `model/prompt` pairs named) and print a summary."""
    wanted = argv or [f"{m}/{p}" for m in ("gemma3:270m", "smollm2:135m") for p in PROMPTS]
    OUT.mkdir(parents=True, exist_ok=True)
    for item in wanted:
        model, name = item.split("/", 1)
        record = capture(model, name)
        path = OUT / f"{model.replace(':', '-')}__{name}.json"
        path.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        first = record["content"][:120].replace("\n", " | ")
        print(f"{path.name}: {record['done_reason']}, {record['eval_count']} tokens: {first}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
