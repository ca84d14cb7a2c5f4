"""CPU time of a cycle's note and similarity work at cycle N of a long run, seeded.

What it measures: the part of a cycle's driver work that used to depend on the number of
earlier cycles - reading the earlier notes, sizing them for the prompt and building it
(at each of the four model calls of a steady-workload cycle), and the similarity
monitor's check of the new reflection - at cycles 300, 1,000, 3,000 and 10,000, without
running thousands of real cycles first: the run's finished cycles are written straight
into a fresh SQLite file (``common.steady_cycle`` reflections, with their similarity
index keys), then 30 further cycles are timed as the nodes do them (the process's caches
warm, each cycle's row written after it). Printed: the median CPU milliseconds per cycle
of the last 25, and the ratio at cycle 10,000 to cycle 1,000. ``cycle_cost.py`` measures
whole cycles of a real run.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

# The shared helpers (common.py, ...) are in benchmarks/, the folder above this one.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import Figure, parser, print_table, report, steady_cycle

from contreact.checkpoints.cycles import CycleRecord, insert_cycle, recent_notes
from contreact.checkpoints.engines import engine_for
from contreact.checkpoints.similarity_index import insert_keys, similar_notes
from contreact.checkpoints.storage import resolve_storage
from contreact.config.sections import SimilaritySettings
from contreact.nodes.notes import in_reach, reach_chars
from contreact.nodes.prompts import build_prompt
from contreact.nodes.similarity import assess
from contreact.text.similarity import index_keys

BUDGET = 8192 - 1024
"""The benchmarks' `num_ctx` minus the default output reserve."""
STEPS = 4
"""Model calls per steady-workload cycle; each sizes and builds the prompt."""


def reflection(cycle: int) -> str:
    return str(steady_cycle(cycle)[-1]["content"])


def work_at(cycles: int, measured: int = 30) -> float:
    """Median CPU ms of one cycle's note and similarity work after `cycles` cycles."""
    engine = engine_for(resolve_storage(Path(tempfile.mkdtemp(prefix="contreact-bench-"))))
    with engine.begin() as conn:
        for cycle in range(1, cycles + 1):
            insert_cycle(conn, "r", CycleRecord(cycle=cycle, reflection=reflection(cycle)))
            insert_keys(conn, "r", cycle, index_keys(reflection(cycle)))
    settings = SimilaritySettings()
    times = []
    for cycle in range(cycles + 1, cycles + 1 + measured):
        started = time.process_time()
        for _ in range(STEPS):
            tail = recent_notes(engine, "r", before=cycle, chars=reach_chars(BUDGET))
            shown, _costs = in_reach(tail, BUDGET, False)
            first = shown.notes[0].cycle if shown.notes else cycle
            build_prompt(tail.notes, [], first_cycle=first, older=tail.older)
        text = reflection(cycle)
        tail = recent_notes(engine, "r", before=cycle, count=settings.recent)
        recent = tail.notes[-settings.recent :]
        keys = index_keys(text)
        with engine.connect() as conn:
            older = similar_notes(conn, "r", keys, before=recent[0].cycle, per_key=settings.per_key)
        assess(text, [(n.cycle, n.reflection) for n in [*older, *recent]])
        times.append((time.process_time() - started) * 1000)
        with engine.begin() as conn:
            insert_cycle(conn, "r", CycleRecord(cycle=cycle, reflection=text))
            insert_keys(conn, "r", cycle, keys)
    return statistics.median(times[5:])


def main() -> None:
    args = parser(__doc__.splitlines()[0]).parse_args()
    points = [300, 1000] if args.quick else [300, 1000, 3000, 10000]
    ms = {n: work_at(n) for n in points}
    print_table(
        ["cycle", "CPU ms/cycle"],
        [[n, ms[n]] for n in points],
        title="Note and similarity work per cycle (median of 25)",
    )
    last = points[-1]
    base = 1000 if last > 1000 else points[0]
    report(
        [
            Figure(
                "work",
                f"note + similarity CPU ms/cycle, cycle {last} vs {base}",
                ms[last] / ms[base],
                "x",
                1.1,
                note=f"{ms[base]:.1f} -> {ms[last]:.1f} ms",
            )
        ],
        args.json,
    )


if __name__ == "__main__":
    main()
