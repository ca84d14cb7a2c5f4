"""Instructions per model call under valgrind (callgrind): the noise-free CPU comparison.

`persistence_cost.py` times CPU per model call with ``time.process_time()``; on a shared
virtual machine the minimum over repetitions still moves by a fifth from one run to the
next, which is as large as the differences the persistence-cost target is about. Valgrind counts the
instructions a process executes: the same program, inputs and environment give the same
count whatever else the machine does. This script counts, for each level of
`persistence_cost.py` ((b) plain LangGraph saving every step, (b2) plain LangGraph saving
once per cycle, (c) contreact in each checkpoint policy, and (a) the hand-written loop),
the instructions of a child process that runs it for ``SHORT`` and for ``LONG`` cycles,
and divides the difference by the difference in model calls: imports, start-up and the
first cycle cancel out, what remains is the steady-state cost of one more model call.

The stub runs outside valgrind (a child process of this script); every child gets a
fresh SQLite file (or a fresh PostgreSQL database with ``--db-url``). Valgrind slows
Python about a hundredfold: a full run takes ~10 minutes on 2 cores (two children at a
time).

``--ablate`` adds contreact's ``cycle`` policy with one mechanism at a time switched off by
monkeypatching in the child (event rows, JSONL lines, journal rows, the similarity monitor,
the lineage wrapper, the fork-point query, the prompt delta each LLM_INVOCATION logs), each
against the same policy with nothing switched off under the same conditions (the heap of
imported modules frozen out of garbage collection): the difference is what that mechanism
costs per model call. Counts are not exact: HTTP reads, thread hand-offs and the checkpoint
writer interleave differently from run to run, and the same build moves by up to ~0.5 M per
call, so only savings well above that are findings.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

# The shared helpers (common.py, ...) are in benchmarks/, the folder above this one.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import (
    CONSTANT_CYCLE,
    PYTHON,
    Figure,
    StubProcess,
    bench_storage,
    constant_work_scenario,
    parser,
    print_table,
    report,
)
from overhead import without_events

LEVELS = {
    "a": "(a) hand-written ChatOllama loop",
    "b": "(b) plain LangGraph, 5 nodes, same saver, sync",
    "b2": "(b2) plain LangGraph, 5 nodes, same saver, once per cycle",
    "b3": "(b3) (b2) + the journal and event log at their floor (FloorBook)",
    "c-cycle": "(c) contreact, policy cycle",
    "c-step": "(c) contreact, policy step",
}
SHORT, LONG = 4, 12


def _switch_off(name: str) -> dict[str, Any]:
    """Switch one of contreact's mechanisms off in this process (a diagnostic, `--ablate`).

    Returns config overrides the ablation needs. The engine's code is not changed: module
    attributes are replaced, so what remains is exactly what the mechanism costs.
    """
    import contreact.checkpoints.journal as journal
    import contreact.checkpoints.lineage as lineage
    import contreact.nodes.invoke as invoke
    import contreact.nodes.step as session

    if name == "none":  # the reference the savings are measured against
        pass
    elif name == "no_events":  # event rows, their payloads' encoding and JSONL lines
        journal.write_record = without_events(journal.write_record)  # type: ignore[assignment]
    elif name == "no_jsonl":
        journal.mirror_lines = lambda *args: None  # type: ignore[assignment]
    elif name == "no_journal_rows":  # the records themselves (their events stay)
        write = journal.write_record
        journal.write_record = lambda conn, run_id, record, batch: write(  # type: ignore[assignment]
            conn, run_id, None, batch
        )
    elif name == "no_similarity":
        return {"similarity": {"enabled": False}}
    elif name == "no_lineage":  # the whole per-step lineage wrapper
        session.lineage_of = lambda state, runtime: state.lineage  # type: ignore[assignment]
    elif name == "no_fork_query":  # only the fork-point test's query, once per invocation
        lineage.is_fork_point = lambda engine, cp: False  # type: ignore[assignment]
    elif name == "no_prompt_delta":  # what each LLM_INVOCATION logs of the prompt
        invoke.logged_messages = lambda *args: []  # type: ignore[assignment]
    elif name == "no_statistics":  # PostgreSQL's statistics thread (timed in seconds: see below)
        import contreact.checkpoints.statistics as statistics

        statistics.autovacuum_is_off = lambda engine: False  # type: ignore[assignment]
    else:
        raise SystemExit(f"unknown ablation {name!r}; known: {', '.join(ABLATIONS)}")
    return {}


ABLATIONS = {
    "none": "nothing switched off, same conditions (the reference)",
    "no_events": "no event rows, payload encoding or JSONL lines",
    "no_jsonl": "no JSONL lines",
    "no_journal_rows": "no journal rows",
    "no_similarity": "no similarity monitor",
    "no_lineage": "no lineage wrapper per step",
    "no_fork_query": "no fork-point query per invocation",
    "no_prompt_delta": "no prompt delta in LLM_INVOCATION",
    "no_statistics": "no statistics thread (PostgreSQL without autovacuum; it wakes every 15 s,"
    " a hundred times as often per call under valgrind)",
}
"""`--ablate`: contreact's `cycle` policy with one mechanism switched off (`_switch_off`)."""


def child(level: str, cycles: int, url: str, db_url: str | None, out: Path) -> None:
    """Run one level for ``cycles`` cycles in this (valgrind-wrapped) process.

    A level ``c-POLICY~ABLATION`` runs contreact with one mechanism switched off.
    """
    from overhead import baseline_loop, contreact_loop, langgraph_floor_loop

    from contreact.config.sections import DEFAULT_MODEL_OPTIONS

    level, _, ablation = level.partition("~")
    extra = _switch_off(ablation) if ablation else {}
    if ablation:
        import gc

        # The imported modules' objects are left out of every collection: whether a full
        # collection of that heap falls into the short or the long run would move the
        # difference by more than most mechanisms cost.
        gc.collect()
        gc.freeze()
    with bench_storage(db_url) as where:
        if level == "a":
            baseline_loop(url, cycles, dict(DEFAULT_MODEL_OPTIONS))
        elif level == "b":
            langgraph_floor_loop(url, cycles, where, True)
        elif level == "b2":
            langgraph_floor_loop(url, cycles, where, True, per_cycle=True)
        elif level == "b3":
            langgraph_floor_loop(url, cycles, where, True, per_cycle=True, bookkeeping=True)
        else:
            policy = level.removeprefix("c-")
            contreact_loop(url, cycles, where, persistence={"checkpoints": policy}, **extra)
    out.write_text("done")


def label(level: str) -> str:
    """How a level (or an ablated one) is named in the tables."""
    base, _, ablation = level.partition("~")
    return f"    {LEVELS[base]}: {ABLATIONS[ablation]}" if ablation else LEVELS[base]


def count(level: str, cycles: int, stub: StubProcess, db_url: str | None, tmp: Path) -> int:
    """Instructions executed by a child running ``level`` for ``cycles`` cycles."""
    done = tmp / f"{level}-{cycles}.done"
    cmd = [
        "valgrind",
        "--tool=callgrind",
        f"--callgrind-out-file={tmp / f'{level}-{cycles}.cg'}",
        PYTHON,
        __file__,
        "--child",
        json.dumps([level, cycles, stub.url, db_url, str(done)]),
    ]
    # A fixed hash seed: set and dict orders (and so the work done) are the same every run.
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=Path(__file__).parent, env=env)
    found = re.search(r"Collected : (\d+)", proc.stderr)
    if proc.returncode != 0 or found is None or not done.exists():
        raise RuntimeError(f"{level} x{cycles} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return int(found.group(1))


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument(
        "--child",
        help="internal: run one level in this process (JSON: level, cycles, url, db, out)",
    )
    p.add_argument("--levels", default=",".join(LEVELS), help="comma-separated level keys")
    p.add_argument(
        "--ablate",
        action="store_true",
        help="also count contreact's cycle policy with one mechanism at a time switched off "
        "(a diagnostic: each row's saving is good to about +-0.5 M instructions)",
    )
    args = p.parse_args()
    if args.child:
        level, cycles, url, db_url, out = json.loads(args.child)
        child(level, cycles, url, db_url, Path(out))
        return
    levels = [k.strip() for k in args.levels.split(",") if k.strip()]
    if args.ablate:
        levels += [f"c-cycle~{name}" for name in ABLATIONS if f"c-cycle~{name}" not in levels]
    short, long = (2, 4) if args.quick else (SHORT, LONG)
    counts: dict[tuple[str, int], int] = {}
    calls: dict[int, int] = {}
    with tempfile.TemporaryDirectory(prefix="contreact-instr-") as tmp_dir:
        tmp = Path(tmp_dir)
        with StubProcess(constant_work_scenario(1000), tmp) as stub:
            # Model calls per run length: the scripted cycle makes the same calls each time.
            calls = {short: short * len(CONSTANT_CYCLE), long: long * len(CONSTANT_CYCLE)}
            jobs = [(lv, n) for lv in levels for n in (short, long)]
            with ThreadPoolExecutor(max_workers=2) as pool:
                results = pool.map(lambda job: count(*job, stub, args.db_url, tmp), jobs)
                counts = dict(zip(jobs, results, strict=True))
    per_call = {
        lv: (counts[(lv, long)] - counts[(lv, short)]) / (calls[long] - calls[short])
        for lv in levels
    }
    rows: list[list[Any]] = []
    for lv in levels:
        base = per_call.get("b")
        saves = per_call["c-cycle~none"] - per_call[lv] if "~" in lv else None
        rows.append(
            [
                label(lv),
                per_call[lv] / 1e6,
                f"{per_call[lv] / base:.2f}x" if base else "",
                f"{per_call[lv] / per_call['b2']:.2f}x" if "b2" in per_call else "",
                "" if saves is None else f"{saves / 1e6:.2f}",
            ]
        )
    backend = "PostgreSQL" if args.db_url else "SQLite"
    print_table(
        ["level", "M instructions / model call", "x (b)", "x (b2)", "saves M"],
        rows,
        title=f"Instructions per model call on {backend} (callgrind; runs of {long} minus "
        f"{short} cycles, {calls[long] - calls[short]} model calls apart)",
    )
    key = "pg" if args.db_url else "sq"
    comparisons = [
        # (figure key, contreact level, floor level, target): each policy against the
        # floor that saves as often, and `cycle` against the first floor too.
        ("instr-cycle", "c-cycle", "b2", 1.25),
        ("instr-cycle-vs-sync", "c-cycle", "b", None),
        ("instr-step", "c-step", "b", None),
    ]
    figures = [
        Figure(
            f"{key}-{name}",
            f"{backend}: instructions/call, {LEVELS[ours]} / {LEVELS[floor]}",
            per_call[ours] / per_call[floor],
            "x",
            target,
        )
        for name, ours, floor, target in comparisons
        if ours in per_call and floor in per_call
    ]
    report(figures, args.json)


if __name__ == "__main__":
    main()
