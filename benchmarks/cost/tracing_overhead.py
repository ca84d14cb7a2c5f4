"""Per-call overhead of tracing: contreact's step time with OTLP tracing off and on.

What it measures: the steady-state wall and CPU time per model call of contreact (the
loop of ``overhead.py``: the same stub in a child process, the constant-work script, three
model calls and two tool calls per cycle, SQLite or ``--db-url``), once with the
OpenTelemetry variables unset and once with ``OTEL_EXPORTER_OTLP_ENDPOINT`` pointing at a
local OTLP/HTTP collector (``otlp_sink.py``, a process of its own that decodes every
request). Traced, every drive sends a run span, a span per cycle, per model call
(OpenInference's LangChain tracer) and per tool call; the spans the collector counted are
checked against that. The two variants alternate (in both orders) and the medians are
compared, so both see the same machine load.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

# The shared helpers (common.py, ...) are in benchmarks/, the folder above this one.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import (
    PYTHON,
    Figure,
    StubProcess,
    bench_storage,
    child_env,
    constant_work_scenario,
    median,
    now,
    parser,
    print_table,
    report,
)
from overhead import contreact_loop, steady_step_s

SPANS_PER_CYCLE = 1 + 3 + 2
"""A cycle span, three model calls, two tool calls (the constant-work cycle)."""


class Sink:
    """``benchmarks/cost/otlp_sink.py`` in a child process."""

    def __enter__(self) -> Sink:
        self.proc = subprocess.Popen(
            [PYTHON, str(Path(__file__).resolve().parent / "otlp_sink.py")],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=child_env(),
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        if not line.startswith("SINK READY "):
            self.proc.kill()
            raise RuntimeError(f"the OTLP sink did not start: {line!r}")
        self.url = line.split()[-1]
        return self

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)

    def spans(self) -> int:
        """Spans received so far."""
        with urllib.request.urlopen(f"{self.url}/count", timeout=10) as answer:
            return int(json.loads(answer.read())["spans"])

    def wait_for(self, spans: int, timeout: float = 30) -> int:
        """Wait until at least `spans` arrived (the batch processor sends every half second)."""
        deadline = time.monotonic() + timeout
        while (got := self.spans()) < spans and time.monotonic() < deadline:
            time.sleep(0.1)
        return got


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    args = p.parse_args()
    cycles, reps = (4, 2) if args.quick else (12, 7)
    times: dict[str, list[float]] = {"off": [], "on": []}
    cpu: dict[str, list[float]] = {"off": [], "on": []}
    with bench_storage(args.db_url) as where, Sink() as sink:
        workdir = Path(where.data_dir).parent
        with StubProcess(constant_work_scenario(1000), workdir) as stub:

            def one(variant: str, n: int) -> list[tuple[float, float]]:
                if variant == "on":
                    os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = sink.url
                else:
                    os.environ.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
                stub.reset()
                return contreact_loop(stub.url, n, where)

            for variant in ("off", "on"):  # warm-up: imports, the tracer provider, caches
                one(variant, 2)
            before = sink.wait_for(1 + SPANS_PER_CYCLE * 2)  # the traced warm-up's
            expected = 0
            for rep in range(reps):
                for variant in ("off", "on") if rep % 2 == 0 else ("on", "off"):
                    ends = one(variant, cycles)
                    calls = len(stub.requests())
                    steps = calls - calls // cycles
                    times[variant].append(steady_step_s(ends, steps))
                    cpu[variant].append(steady_step_s(ends, steps, cpu=True))
                    if variant == "on":
                        expected += 1 + SPANS_PER_CYCLE * cycles
            started = now()
            got = sink.wait_for(before + expected) - before
            waited = now() - started
    os.environ.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
    off, on = median(times["off"]) * 1000, median(times["on"]) * 1000
    off_cpu, on_cpu = median(cpu["off"]) * 1000, median(cpu["on"]) * 1000
    print_table(
        ["tracing", "runs", "ms/call", "CPU ms/call"],
        [
            ["off (variables unset)", f"{reps} x {cycles} cycles", off, off_cpu],
            ["on (OTLP/HTTP to a local collector)", f"{reps} x {cycles} cycles", on, on_cpu],
            ["difference", "", on - off, on_cpu - off_cpu],
        ],
        title="Per model call, steady state at 0 ms model latency (median of alternating runs)",
    )
    print(f"spans at the collector: {got} of {expected} sent ({waited:.1f} s after the last run)")
    report(
        [
            Figure(
                "t",
                "tracing on - off, wall ms per model call",
                on - off,
                "ms",
                note=f"{off:.2f} -> {on:.2f} ms/call",
            ),  # fmt: skip
            Figure(
                "t-cpu",
                "tracing on - off, CPU ms per model call",
                on_cpu - off_cpu,
                "ms",
                note=f"{off_cpu:.2f} -> {on_cpu:.2f} CPU ms/call",
            ),  # fmt: skip
            Figure("t-spans", "spans at the collector / spans sent", got / max(expected, 1), "x"),
        ],
        args.json,
    )


if __name__ == "__main__":
    main()
