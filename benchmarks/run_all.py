"""Run every benchmark and print one summary table: figure, measured, target, pass/miss.

Each benchmark script runs in its own interpreter (so engine caches, imported modules
and memory of one cannot flatter the next), with its detailed output passed through,
and writes its figures to a JSON file that this script collects. ``--quick`` runs the
short smoke versions (under a minute in all); ``--db-url`` runs them on a throwaway
PostgreSQL database instead of SQLite; ``--only`` picks benchmarks by name.

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
    ("overhead", "(a) per-step overhead vs a hand-written loop"),
    ("storage_growth", "(b) database bytes per cycle"),
    ("prefix_reuse", "(c) prompt-prefix reuse"),
    ("resume_latency", "(d) resume latency at cycle 200"),
    ("throughput", "(e) throughput of concurrent runs"),
    ("memory_rss", "(f) peak RSS"),
    ("persistence_cost", "persistence cost per model call, per stored cycle, at resume"),
    ("instructions", "persistence cost in instructions per model call (callgrind, ~10 minutes)"),
    ("startup", "CLI start-up"),
    ("call_deadline", "(g) a call abandoned at its deadline"),
    ("cycle_cost", "driver time per cycle, first vs last 10 % of a 1,000-cycle steady run"),
    ("cycle_work", "note and similarity work per cycle at cycle 10,000 vs 1,000 (seeded)"),
]


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument(
        "--only",
        metavar="NAMES",
        help=f"comma-separated subset of: {', '.join(n for n, _ in BENCHMARKS)}",
    )
    args = p.parse_args()
    chosen = [b for b in BENCHMARKS if not args.only or b[0] in args.only.split(",")]
    figures: list[Figure] = []
    failures: list[str] = []
    durations: list[tuple[str, float, str]] = []
    started = time.monotonic()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="contreact-bench-all-") as tmp:
        for name, title in chosen:
            out = Path(tmp) / f"{name}.json"
            cmd = [PYTHON, str(HERE / f"{name}.py"), "--json", str(out)]
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
    if failures:
        print(f"\nFAILED: {', '.join(failures)}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
