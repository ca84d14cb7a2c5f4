"""(a) Per-step overhead of contreact against a minimal hand-written Ollama loop.

What it measures: the wall time of one ReAct step (one model call and what follows it)
in contreact, divided by the same for a minimal loop written by hand - plain
``ChatOllama`` calls, a list of messages, a dict for memory, no checkpoints, no journal,
no events - at 0 ms and at 100 ms model latency.

How: both loops talk to the same stub server (``python -m contreact.stub`` in a child
process, so its CPU work does not compete for this interpreter's GIL) over real HTTP,
playing the same constant-work script (each cycle: ``write note``, ``read note``, final
answer: three model calls). Both send the same system prompt, the same previous-
reflections section, the same six tool schemas and the same model options. contreact
runs in this process through ``contreact.runner.start_run`` on a real SQLite database
(or PostgreSQL with ``--db-url``) with its defaults: ``durability="sync"``, journaled
model and tool calls, the event log, the similarity monitor. The number of model calls
is checked to be equal for both loops.

Step time is steady state: the time from the end of cycle 1 to the end of the last
cycle, divided by the model calls in between, so one-off costs (registering the run,
compiling the graph, opening the checkpointer, the first HTTP connection) are excluded;
the whole-run times are printed too. Baseline and contreact runs alternate (in both
orders) and the medians are compared, so both see the same machine load. The ratio at
0 ms latency has the target (<= 1.5x): that is where the framework's own cost shows;
at 100 ms it is diluted by the model.

``--profile`` adds a breakdown of contreact's step time: per node (wall time between
the graph's update events, which includes each superstep's checkpoint write) and per
component (a sampling profiler that also sees LangGraph's checkpoint-writing thread;
see ``benchmarks/sampling.py``).
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from common import (
    MODEL,
    BenchStorage,
    Figure,
    StubProcess,
    bench_storage,
    constant_work_scenario,
    median,
    now,
    parser,
    print_table,
    report,
    run_config,
)


def baseline_loop(host: str, cycles: int, model_options: dict[str, Any]) -> list[float]:
    """The minimal hand-written loop: ChatOllama, a message list, a dict for memory.

    Args:
        host: The stub's URL.
        cycles: Cycles to run.
        model_options: Ollama options, as contreact sends them.

    Returns:
        ``perf_counter()`` at the end of each cycle (index 0 = cycle 1).
    """
    from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage, ToolMessage
    from langchain_ollama import ChatOllama

    from nodes.prompts import REFLECTIONS_HEADING, SYSTEM_PROMPT
    from tools.registry import TOOL_SCHEMAS

    llm = ChatOllama(
        model=MODEL, base_url=host, keep_alive="5m", client_kwargs={"timeout": 60}
    ).bind_tools(TOOL_SCHEMAS)
    memory: dict[str, str] = {}
    notes: list[str] = []
    ends: list[float] = []
    for cycle in range(1, cycles + 1):
        system = SYSTEM_PROMPT
        if notes:
            system += "\n\n" + "\n\n".join([REFLECTIONS_HEADING, *notes])
        messages: list[BaseMessage] = [
            SystemMessage(system),
            HumanMessage(f"Cycle {cycle} begins."),
        ]
        for _ in range(10):
            reply = llm.invoke(messages, options=model_options)
            messages.append(reply)
            if not reply.tool_calls:
                notes.append(f"Cycle {cycle}: {reply.content}")
                break
            for call in reply.tool_calls:
                args = call["args"]
                if call["name"] == "write":
                    memory[args["key"]] = args["value"]
                    output = f"Stored '{args['key']}'."
                else:
                    output = memory.get(args.get("key", ""), "Error: no such key.")
                messages.append(ToolMessage(output, tool_call_id=call["id"] or "x"))
        ends.append(now())
    return ends


class CycleClock:
    """A runner `Progress` that notes when each cycle ends and how long each node took."""

    def __init__(self) -> None:
        self.ends: list[float] = []
        self.node_time: Counter[str] = Counter()
        self.node_count: Counter[str] = Counter()
        self._last = now()

    def started(self, record: Any, state: Any, resumed: bool) -> None:
        """Start the node clock."""
        self._last = now()

    def update(self, node: str, update: dict[str, Any]) -> None:
        """Charge the time since the previous update to ``node``; note cycle ends."""
        t = now()
        self.node_time[node] += t - self._last
        self.node_count[node] += 1
        self._last = t
        if node == "reflect":
            self.ends.append(t)

    def operator(self, message: str, reply: str | None, policy: str) -> None:
        """Nothing to note."""

    def finished(self, outcome: Any) -> None:
        """Nothing to note."""


def contreact_loop(
    host: str, cycles: int, where: BenchStorage, clock: CycleClock | None = None
) -> list[float]:
    """Run contreact in this process for ``cycles`` cycles.

    Args:
        host: The stub's URL.
        cycles: Cycles to run.
        where: Storage for the run.
        clock: Progress recorder to use (a fresh one if None).

    Returns:
        ``perf_counter()`` at the end of each cycle.
    """
    from contreact.config import parse_config
    from contreact.runner import start_run

    clock = clock or CycleClock()
    run_id = f"overhead-{uuid.uuid4().hex[:8]}"
    config = parse_config(run_config(run_id, host, cycles, where), "benchmark")
    outcome = start_run(config, where.storage(), progress=clock)
    if outcome.status != "completed":
        raise RuntimeError(f"contreact run ended {outcome.status}: {outcome.reason}")
    return clock.ends


def steady_step_s(ends: list[float], steps_after_first: int) -> float:
    """Seconds per step from the end of cycle 1 to the end of the last cycle."""
    return (ends[-1] - ends[0]) / steps_after_first


def measure(
    stub: StubProcess, where: BenchStorage, cycles: int, reps: int
) -> dict[str, list[float]]:
    """Alternate baseline and contreact runs; return per-step times and whole-run times.

    Args:
        stub: The running stub.
        where: Storage for contreact's runs.
        cycles: Cycles per run.
        reps: Runs of each loop.

    Returns:
        ``{"baseline": [...], "contreact": [...], "baseline_run": [...],
        "contreact_run": [...]}`` in seconds (per step, and per whole run).
    """
    from graph.state import default_model_options

    options = default_model_options()
    loops: dict[str, Callable[[], list[float]]] = {
        "baseline": lambda: baseline_loop(stub.url, cycles, options),
        "contreact": lambda: contreact_loop(stub.url, cycles, where),
    }
    out: dict[str, list[float]] = {k: [] for k in ("baseline", "contreact")}
    out.update({f"{k}_run": [] for k in ("baseline", "contreact")})
    calls: dict[str, set[int]] = {"baseline": set(), "contreact": set()}
    # Warm-up (imports, first connections, SQLAlchemy statement caches), not measured.
    for name in loops:
        stub.reset()
        baseline_loop(stub.url, 2, options) if name == "baseline" else contreact_loop(
            stub.url, 2, where
        )
    for rep in range(reps):
        order = ["baseline", "contreact"] if rep % 2 == 0 else ["contreact", "baseline"]
        for name in order:
            stub.reset()
            started = now()
            ends = loops[name]()
            out[f"{name}_run"].append(now() - started)
            requests = stub.requests()
            calls[name].add(len(requests))
            first_cycle_calls = sum(1 for r in requests if _opens_or_in_cycle_1(r))
            out[name].append(steady_step_s(ends, len(requests) - first_cycle_calls))
    if calls["baseline"] != calls["contreact"] or len(calls["baseline"]) != 1:
        raise RuntimeError(f"model calls differ: {calls}")
    return out


def _opens_or_in_cycle_1(request: dict[str, Any]) -> bool:
    """Whether a recorded request belongs to cycle 1 (its first user turn says so)."""
    users = [m for m in request["body"]["messages"] if m.get("role") == "user"]
    return bool(users) and str(users[0].get("content", "")).startswith("Cycle 1 ")


def profile(stub: StubProcess, where: BenchStorage, cycles: int) -> None:
    """Print where contreact's step time goes: per node and per component."""
    from sampling import Sampler, shares

    clock = CycleClock()
    sampler = Sampler().start()
    contreact_loop(stub.url, cycles, where, clock)
    counts = sampler.stop()
    steps = clock.node_count["invoke"]
    rows = [
        [node, clock.node_count[node], clock.node_time[node] / steps * 1000]
        for node in ("assemble", "invoke", "parse", "dispatch", "reflect")
    ]
    total = sum(clock.node_time.values()) / steps * 1000
    rows.append(["all", sum(clock.node_count.values()), total])
    print_table(
        ["node (incl. its superstep's checkpoint write)", "supersteps", "ms per model call"],
        rows,
        title=f"Profile, 0 ms latency, {cycles} cycles, {steps} model calls "
        "(sampling profiler running: times are inflated)",
    )
    print_table(
        ["component (sampled wall time)", "share", "ms per model call"],
        [[name, f"{share:.1%}", share * total] for name, share in shares(counts)],
    )


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--profile", action="store_true", help="also print where the time goes")
    args = p.parse_args()
    cycles, reps = (4, 2) if args.quick else (12, 5)
    slow_cycles, slow_reps = (2, 1) if args.quick else (4, 3)
    figures: list[Figure] = []
    rows = []
    with bench_storage(args.db_url) as where:
        workdir = Path(where.data_dir).parent
        for latency, n_cycles, n_reps in ((0, cycles, reps), (100, slow_cycles, slow_reps)):
            scenario = constant_work_scenario(1000)
            with StubProcess(scenario, workdir, latency_ms=latency) as stub:
                result = measure(stub, where, n_cycles, n_reps)
                if args.profile and latency == 0:
                    profile(stub, where, cycles)
            base, cont = median(result["baseline"]), median(result["contreact"])
            rows.append(
                [
                    f"{latency} ms",
                    f"{n_reps} x {n_cycles} cycles",
                    base * 1000,
                    cont * 1000,
                    (cont - base) * 1000,
                    f"{cont / base:.2f}x",
                    f"{median(result['baseline_run']):.2f} / {median(result['contreact_run']):.2f}",
                ]
            )
            figures.append(
                Figure(
                    "a" if latency == 0 else "a100",
                    f"step time ratio contreact/baseline @{latency} ms",
                    cont / base,
                    "x",
                    1.5 if latency == 0 else None,
                    note=f"{base * 1000:.2f} -> {cont * 1000:.2f} ms/step",
                )
            )
    print_table(
        [
            "latency",
            "runs",
            "baseline ms/step",
            "contreact ms/step",
            "overhead ms/step",
            "ratio",
            "whole run s (base / contreact)",
        ],
        rows,
        title="(a) per-step time, steady state (median of alternating runs)",
    )
    report(figures, args.json)


if __name__ == "__main__":
    main()
