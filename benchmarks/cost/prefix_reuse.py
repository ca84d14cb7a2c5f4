"""(c) Prompt-prefix reuse inside a cycle: what Ollama's prompt cache can keep.

What it measures: for every model request after the first of its cycle, the share of
the request's prompt that repeats the previous request's prompt from the start (the
longest common prefix). Ollama keeps the previous prompt's evaluated tokens and reuses
the longest common prefix with the next prompt, so this share is the part of each
prompt the model does not have to evaluate again. contreact keeps a cycle's messages
append-only so the cache stays warm; 100 % is impossible, because each request adds
the model's last answer and the tool results (new text by nature).

How: contreact runs in this process (``start_run``, SQLite in a temp dir, or PostgreSQL
with ``--db-url``) against an in-process stub that records every ``/api/chat`` body it
receives over real HTTP from the real ChatOllama client. Two agents:

* the stub's simulated explorer (``SimulatedAgent``): 3-5 tool calls per cycle using
  all six tools (one operator message, answered by the ``auto`` policy);
* the looper (``LooperAgent``) with ``max_tool_calls_per_cycle: 6``: six writes, then the
  tools are withdrawn and the cycle ends - the path where the request changes most.

A prompt is serialized as the request's messages, each as canonical JSON (sorted keys)
joined by newlines - what Ollama's chat template renders, up to the template's own
markup. The tool definitions are compared separately (they are rendered into the prompt
too, so a change would also cost a cache miss). The figure is the mean share over all
within-cycle requests of both agents; the minimum and the count of requests whose prompt
starts with the entire previous prompt (append-only) are printed as well.
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The shared helpers (common.py, ...) are in benchmarks/, the folder above this one.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import (
    BenchStorage,
    Figure,
    bench_storage,
    parser,
    print_table,
    report,
    run_config,
)

from contreact.stub import ChatRequest, LooperAgent, SimulatedAgent, StubServer


def serialize(messages: list[dict[str, Any]]) -> str:
    """A request's messages as the text whose prefix the cache can reuse."""
    return "\n".join(json.dumps(m, sort_keys=True, ensure_ascii=False) for m in messages)


def common_prefix(a: str, b: str) -> int:
    """Length of the longest common prefix of two strings."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n
    while lo < hi:  # binary search on the first differing position
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


@dataclass
class Reuse:
    """One within-cycle request compared with its predecessor."""

    cycle: int
    step: int
    chars: int
    reused: int
    previous_chars: int
    append_only: bool
    same_tools: bool
    tools_chars: int

    @property
    def share(self) -> float:
        """Share of this prompt (messages) that repeats the previous prompt's prefix."""
        return self.reused / self.chars if self.chars else 1.0

    @property
    def ceiling(self) -> float:
        """The share if the whole previous prompt were reused (append-only at best)."""
        return min(self.previous_chars, self.chars) / self.chars if self.chars else 1.0

    @property
    def share_with_tools(self) -> float:
        """The share when the tool definitions are rendered ahead of the messages."""
        reused = self.reused + (self.tools_chars if self.same_tools else 0)
        return reused / (self.chars + self.tools_chars)


def analyse(requests: list[dict[str, Any]]) -> list[Reuse]:
    """Compare each request with the previous one of the same cycle."""
    out: list[Reuse] = []
    previous: tuple[int, str, Any] | None = None
    for record in requests:
        body = record["body"]
        req = ChatRequest.from_body(body)
        text = serialize(body.get("messages") or [])
        tools = body.get("tools") or []
        if previous is not None and previous[0] == req.cycle:
            reused = common_prefix(previous[1], text)
            out.append(
                Reuse(
                    cycle=req.cycle,
                    step=req.step,
                    chars=len(text),
                    reused=reused,
                    previous_chars=len(previous[1]),
                    append_only=reused == len(previous[1]),
                    same_tools=tools == previous[2],
                    tools_chars=len(json.dumps(tools, sort_keys=True)),
                )
            )
        previous = (req.cycle, text, tools)
    return out


def mean_of(items: list[Reuse], attr: str) -> float:
    """Mean of one property over the requests."""
    return sum(getattr(r, attr) for r in items) / len(items)


def run_agent(agent: Any, where: BenchStorage, cycles: int, **extra: Any) -> list[dict[str, Any]]:
    """Run contreact against an in-process stub answering with ``agent``; return its requests."""
    from contreact.config import parse_config
    from contreact.engine.runner import start_run

    with StubServer(agent).start() as stub:
        run_id = f"prefix-{uuid.uuid4().hex[:6]}"
        config = parse_config(run_config(run_id, stub.url, cycles, where, **extra), "benchmark")
        outcome = start_run(config, where.storage())
        if outcome.status != "completed":
            raise RuntimeError(f"run ended {outcome.status}: {outcome.reason}")
        return stub.requests()


def main() -> None:
    args = parser(__doc__.splitlines()[0]).parse_args()
    explorer_cycles, looper_cycles = (3, 1) if args.quick else (12, 3)
    results: dict[str, list[Reuse]] = {}
    with bench_storage(args.db_url) as where:
        results["simulated explorer"] = analyse(
            run_agent(SimulatedAgent(seed=1), where, explorer_cycles)
        )
        results["looper, tools withdrawn"] = analyse(
            run_agent(LooperAgent(), where, looper_cycles, limits={"max_tool_calls_per_cycle": 6})
        )
    rows = []
    for name, items in results.items():
        shares = [r.share for r in items]
        worst = min(items, key=lambda r: r.share)
        rows.append(
            [
                name,
                len(items),
                f"{sum(shares) / len(shares):.1%}",
                f"{mean_of(items, 'ceiling'):.1%}",
                f"{worst.share:.1%} (c{worst.cycle} s{worst.step})",
                f"{sum(r.append_only for r in items)}/{len(items)}",
                sum(r.chars - r.reused for r in items) // len(items),
                f"{sum(r.same_tools for r in items)}/{len(items)}",
                f"{mean_of(items, 'share_with_tools'):.1%}",
            ]
        )
    print_table(
        [
            "agent",
            "requests",
            "mean reuse",
            "ceiling",
            "min reuse (cycle, step)",
            "append-only",
            "new chars/req",
            "same tools",
            "reuse incl. tools",
        ],
        rows,
        title="(c) prompt prefix shared with the previous request of the same cycle",
    )
    everything = [r for items in results.values() for r in items]
    by_cycle: dict[int, list[Reuse]] = {}
    for r in results["simulated explorer"]:
        by_cycle.setdefault(r.cycle, []).append(r)
    print_table(
        ["cycle", "requests", "prompt chars", "mean reuse", "ceiling"],
        [
            [
                c,
                len(v),
                sum(r.chars for r in v) // len(v),
                f"{mean_of(v, 'share'):.1%}",
                f"{mean_of(v, 'ceiling'):.1%}",
            ]
            for c, v in sorted(by_cycle.items())
        ],
        title="Simulated explorer by cycle (earlier reflections lengthen the stable prefix)",
    )
    mean = sum(r.share for r in everything) / len(everything)
    report(
        [
            Figure(
                "c",
                "prompt prefix reused within a cycle (mean)",
                mean * 100,
                "%",
                95.0,
                higher_is_better=True,
                note=f"min {min(r.share for r in everything):.1%}; append-only "
                f"{sum(r.append_only for r in everything)}/{len(everything)}",
            ),
            Figure(
                "c-ceil",
                "ceiling of (c) for append-only prompts (mean)",
                mean_of(everything, "ceiling") * 100,
                "%",
                note="reuse if every previous prompt were kept whole",
            ),
            Figure(
                "c-tools",
                "(c) with tool definitions rendered first (mean)",
                mean_of(everything, "share_with_tools") * 100,
                "%",
            ),
        ],
        args.json,
    )
    if os.environ.get("BENCH_DEBUG"):
        for r in everything:
            print(r)


if __name__ == "__main__":
    main()
