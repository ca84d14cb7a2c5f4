"""Run every benchmark and print one summary table: figure, measured, target, pass/miss.

Each benchmark script runs in its own interpreter (so engine caches, imported modules
and memory of one cannot flatter the next), with its detailed output passed through,
and writes its figures to a JSON file that this script collects. ``--quick`` runs the
short smoke versions; ``--db-url`` runs them on a throwaway PostgreSQL database instead of
SQLite (the scripts that need PostgreSQL use the local test server without it); ``--only``
picks benchmarks by name, ``--kind`` by folder. The scripts it leaves out are named, with
the reason, in :data:`LEFT_OUT`.

Exit status: 0 when every script ran (missed targets are reported, not errors), 1 when
a script failed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import PYTHON, Figure, parser, print_table

HERE = Path(__file__).resolve().parent
BENCHMARKS = [
    ("cost/overhead.py", "(a) per-step overhead vs a hand-written loop"),
    ("cost/storage_growth.py", "(b) database bytes per cycle"),
    ("cost/prefix_reuse.py", "(c) prompt-prefix reuse"),
    ("cost/resume_latency.py", "(d) resume latency at cycle 200"),
    ("cost/throughput.py", "(e) throughput of concurrent runs"),
    ("cost/memory_rss.py", "(f) peak RSS"),
    ("cost/persistence_cost.py", "persistence cost per model call, per stored cycle, at resume"),
    ("cost/instructions.py", "persistence cost in instructions per model call (callgrind)"),
    ("cost/startup.py", "CLI start-up, cold"),
    ("cost/cycle_cost.py", "driver time per cycle, first vs last 10 % of a steady run"),
    ("cost/cycle_work.py", "note and similarity work per cycle at cycle 10,000 vs 1,000 (seeded)"),
    ("cost/long_run.py", "(L) a long run: time, bytes, RSS and commands per mark"),
    ("cost/similarity_speed.py", "the similarity monitor and matrix as a run grows"),
    ("cost/parser_speed.py", "the tool-call parser on large and adversarial output"),
    ("cost/fence_cost.py", "the queue's fence per model call (PostgreSQL)"),
    ("cost/study_load.py", "contreact.load and export --batch of a batch"),
    ("cost/study_workers.py", "(W) a study on the queue: 3 workers vs 1, and killed (PostgreSQL)"),
    ("cost/pg_scale.py", "what one run and one queue worker cost PostgreSQL"),
    ("robustness/call_deadline.py", "(g) a call abandoned at its deadline"),
    ("robustness/random_kill.py", "kill -9 at random moments, resumed"),
    ("robustness/signal_stop.py", "SIGTERM and SIGINT mid-run"),
    ("robustness/concurrent_sqlite.py", "16 runs at once on one SQLite file"),
    ("reports/parser_corpus_table.py", "the tool-call dialect corpus per model family"),
]
"""Every benchmark run_all runs: its path under benchmarks/ and what it measures."""
LEFT_OUT = {
    "capture/real_capture.py": "it writes test data (tests/data/real_captures/), not figures, "
    "and needs the `real` extra",
    "cost/tracing_overhead.py": "it needs the `otel` extra (the integrations tier's), which "
    "the benchmarks' environment does not install",
    "cost/console_load.py": "it builds a study of 100 runs x 100 cycles and needs the `ui` "
    "extra: about 10 minutes; run it on its own",
    "cost/otlp_sink.py": "a local OTLP collector that tracing_overhead.py starts, not a benchmark",
    "reports/real_models.py": "it needs the `real` extra (llama-cpp-python, built from source) "
    "and minutes of CPU generation per model; it has no smoke version",
}
"""The scripts run_all leaves out, and why (printed, and in benchmarks/README.md)."""


def name_of(path: str) -> str:
    """A benchmark's name for `--only`: its file name without `.py`."""
    return Path(path).stem


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument(
        "--only",
        metavar="NAMES",
        help=f"comma-separated subset of: {', '.join(name_of(b) for b, _ in BENCHMARKS)}",
    )
    p.add_argument(
        "--kind",
        metavar="KINDS",
        help="comma-separated subset of the folders: cost, robustness, reports",
    )
    args = p.parse_args()
    names = args.only.split(",") if args.only else None
    kinds = args.kind.split(",") if args.kind else None
    unknown = sorted(set(names or ()) - {name_of(b) for b, _ in BENCHMARKS})
    if unknown:
        p.error(f"no benchmark named {', '.join(unknown)}")
    chosen = [
        (path, title)
        for path, title in BENCHMARKS
        if (names is None or name_of(path) in names)
        and (kinds is None or path.split("/")[0] in kinds)
    ]
    for path, why in LEFT_OUT.items():
        print(f"left out: {path}: {why}")
    figures: list[Figure] = []
    failures: list[str] = []
    durations: list[tuple[str, float, str]] = []
    started = time.monotonic()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="contreact-bench-all-") as tmp:
        for path, title in chosen:
            name = name_of(path)
            out = Path(tmp) / f"{name}.json"
            cmd = [PYTHON, str(HERE / path), "--json", str(out)]
            if args.quick:
                cmd.append("--quick")
            if args.db_url:
                cmd += ["--db-url", args.db_url]
            print(f"\n=== {title}: {' '.join(cmd[1:])}", flush=True)
            t0 = time.monotonic()
            rc = subprocess.run(cmd, check=False).returncode
            durations.append((name, time.monotonic() - t0, "ok" if rc == 0 else f"rc {rc}"))
            if rc != 0 or not out.exists():
                failures.append(name)
                continue
            figures += [Figure(**f) for f in json.loads(out.read_text())]
    total = time.monotonic() - started
    load_after = os.getloadavg()
    print_table(
        ["benchmark", "seconds", "status"],
        [[n, d, s] for n, d, s in durations],
        title=f"\nRan {len(chosen)} benchmark(s) in {total:.0f} s"
        f"{' (quick versions)' if args.quick else ''}"
        f"{' on PostgreSQL' if args.db_url else ' on SQLite'}; {os.cpu_count()} CPUs, "
        f"load average {load_before[0]:.1f} before, {load_after[0]:.1f} after "
        "(timings are wall clock: other load on the machine inflates them)",
    )
    print_table(
        ["figure", "measured", "target", "verdict", "note"],
        [[f"({f.key}) {f.label}", f.value_text, f.target_text, f.verdict, f.note] for f in figures],
        title="SUMMARY",
    )
    for path, why in LEFT_OUT.items():
        print(f"left out: {path}: {why}")
    if failures:
        print(f"\nFAILED: {', '.join(failures)}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
