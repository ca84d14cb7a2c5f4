"""What a run left behind, comparable across runs: for the crash and signal benchmarks.

Two runs of one deterministic stub script must end identical however often one of them
was killed and resumed. "Identical" is what `tests/conftest.outcome` compares: the
reflection and flags of every cycle, the memory, and every event of the JSONL log with
its wall-clock fields removed. Benchmarks cannot import the tests, so it lives here too.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from common import BenchStorage

VOLATILE = {
    "timestamp",
    "duration_s",
    "seconds",
    "model_seconds",
    "wait_s",
    "host",
    "process_alive",
}


def stable(value: Any) -> Any:
    """`value` without wall-clock fields."""
    if isinstance(value, dict):
        return {k: stable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [stable(v) for v in value]
    return value


def outcome(where: BenchStorage, run_id: str) -> tuple[Any, ...]:
    """(cycle, reflection, flags) per cycle, the memory, and the stable event summary."""
    from contreact.checkpoints.cycles import cycle_records
    from contreact.checkpoints.engines import engine_for
    from contreact.tools.memory import memory_snapshot

    engine = engine_for(where.storage())
    cycles = [(r.cycle, r.reflection, r.flags) for r in cycle_records(engine, run_id)]
    log = where.data_dir / "logs" / f"{run_id}.jsonl"
    events = [json.loads(x) for x in log.read_text(encoding="utf-8").splitlines() if x]
    summary = [(e["cycle_number"], e["event_type"], stable(e["payload"])) for e in events]
    return cycles, memory_snapshot(engine, run_id), summary


def bodies(requests: list[dict[str, Any]]) -> Counter[str]:
    """The model requests as a multiset of their JSON bodies."""
    return Counter(json.dumps(r["body"], sort_keys=True) for r in requests)
