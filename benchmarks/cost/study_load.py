"""What `contreact.load` and `contreact export --batch` cost for a batch of runs.

A batch of 3 models x 2 replicates x 30 cycles is run on the bundled stub's simulated
explorer (about 12 events per cycle: model calls, tool calls, an operator message), then
loaded as DataFrames and exported as parquet and as CSV. Printed: the tables' sizes, the
time of each (best of 3), and the load time per 1000 events, the figure that says how far a
study scales (the event log is most of what is read). Needs the analysis extra.
Run: `.venv/bin/python benchmarks/cost/study_load.py [--quick] [--db-url URL]`.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# The shared helpers (common.py, ...) are in benchmarks/, the folder above this one.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import Figure, bench_storage, parser, print_table, report, run_config

import contreact
from contreact.analysis.export import export_tables
from contreact.analysis.runs import select_runs
from contreact.checkpoints.engines import engine_for
from contreact.config import parse_config
from contreact.engine.runner import start_run
from contreact.stub import StubServer


def best_of(runs: int, fn: Callable[[], Any]) -> float:
    """The fastest of `runs` calls, in seconds."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    args = parser(__doc__.splitlines()[0]).parse_args()
    models, replicates, cycles = (
        (("m-a", "m-b"), 1, 5) if args.quick else (("m-a", "m-b", "m-c"), 2, 30)
    )
    with bench_storage(args.db_url) as where, StubServer(models=list(models)).start() as server:
        for model in models:
            for replicate in range(1, replicates + 1):
                run_id = f"bench.{model}.r{replicate}"
                config = run_config(run_id, server.url, cycles, where, model=model, batch="bench")
                outcome = start_run(parse_config(config, run_id), where.storage())
                assert outcome.status == "completed", outcome
        storage = where.storage()
        study = contreact.load(batch="bench", storage=storage)
        sizes = {name: len(table) for name, table in study.tables().items()}
        load_s = best_of(3, lambda: contreact.load(batch="bench", storage=storage))
        engine = engine_for(storage)
        chosen = select_runs(engine, None, "bench")
        out = Path(where.data_dir) / "exports"
        parquet_s = best_of(3, lambda: export_tables(engine, chosen, "parquet", out))
        csv_s = best_of(3, lambda: export_tables(engine, chosen, "csv", out))
        megabytes = sum(p.stat().st_size for p in out.glob("*.parquet")) / 1e6
    runs = len(models) * replicates
    print_table(
        ["table", "rows"],
        [[name, rows] for name, rows in sizes.items()],
        title=f"A batch of {runs} runs x {cycles} cycles on the stub's simulated explorer",
    )
    per_k = load_s / sizes["events"] * 1000
    figures = [
        Figure("load", f"contreact.load, {runs} runs x {cycles} cycles", load_s, "s"),
        Figure("load-k", "contreact.load per 1000 events", per_k, "s"),
        Figure("parquet", "export --batch --format parquet", parquet_s, "s"),
        Figure("csv", "export --batch --format csv", csv_s, "s"),
        Figure("parquet-mb", "parquet files, all tables", megabytes, "MB"),
    ]
    report(figures, args.json)


if __name__ == "__main__":
    main()
