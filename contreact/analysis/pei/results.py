"""Stored PEI ratings: one row per (rated run, evaluator) in `contreact_pei`, and its name.

Storing every answer is what lets `pei` run again without asking again (the answer is
re-parsed instead), keeps a level set by hand, and feeds the report's matrix. The same
question asked again under other seeds (`pei --repeat K`) is stored per repeat in
`contreact_pei_repeats` (repeat 2 on; repeat 1 is the rating itself), for the evaluators'
test-retest consistency.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, select

from contreact.analysis.pei.history import Omitted
from contreact.checkpoints.registry import RUN_ID_PATTERN
from contreact.checkpoints.schema import pei as pei_results
from contreact.checkpoints.schema import pei_repeats
from contreact.checkpoints.statements import upsert


def evaluator_slug(model: str) -> str:
    """A model name as a run-id part: `llama3.1:8b` -> `llama3.1-8b`."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", model).strip("-._") or "model"


def pei_run_id(run_id: str, evaluator: str) -> str:
    """A name for the rating of `run_id` by `evaluator`: `<run>.pei.<slug>`.

    Over-long ids keep their start and end in a hash, so they stay valid and distinct.
    """
    fork = f"{run_id}.pei.{evaluator_slug(evaluator)}"
    if RUN_ID_PATTERN.match(fork):
        return fork
    digest = hashlib.sha256(fork.encode()).hexdigest()[:12]
    return f"{fork[:180]}-{digest}"


@dataclass(frozen=True)
class PeiResult:
    """One stored rating: `evaluator` read `run_id` up to `at_cycle` and answered."""

    run_id: str
    evaluator: str
    fork_run_id: str
    """The rating's name (`<run>.pei.<evaluator>`)."""
    at_cycle: int
    level: int | None
    reason: str
    answer: str
    instrument_sha: str
    created_at: str
    omitted: str | None = None
    """JSON of `Omitted`: what of the history was left out (None: set by hand)."""
    manual: bool = False
    """The level was set by hand (`pei --set`), not parsed from an answer."""
    options: str | None = None
    """JSON of the Ollama options the question was sent with (None: not recorded)."""
    repeat: int = 1
    """Which asking of the same question this is (`pei --repeat K`); 1 is the rating."""

    def is_stale(self, last_cycle: int) -> bool:
        """Whether the rated run went on after this rating (it rated a shorter history)."""
        return self.at_cycle < last_cycle

    def options_text(self) -> str:
        """The options sent, as `key=value` pairs ("" when not recorded)."""
        if not self.options:
            return ""
        return ", ".join(f"{k}={v}" for k, v in json.loads(self.options).items())

    def omitted_text(self) -> str:
        """What was left out, in words ("" when unknown)."""
        if not self.omitted:
            return ""
        return Omitted(**json.loads(self.omitted)).describe()


def stored_result(engine: Engine, run_id: str, evaluator: str, repeat: int = 1) -> PeiResult | None:
    """The stored rating of `run_id` by `evaluator` (its `repeat`-th asking), or None."""
    table = pei_results if repeat == 1 else pei_repeats
    query = select(table).where(table.c.run_id == run_id, table.c.evaluator == evaluator)
    if repeat != 1:
        query = query.where(pei_repeats.c.repeat == repeat)
    with engine.connect() as conn:
        row = conn.execute(query).mappings().first()
    return None if row is None else _result(dict(row))


def _result(row: dict[str, Any]) -> PeiResult:
    row["manual"] = bool(row.get("manual"))
    return PeiResult(**row)


def save_result(engine: Engine, result: PeiResult) -> None:
    """Store `result`, replacing an earlier one of the same run, evaluator and repeat."""
    values = dict(result.__dict__)
    with engine.begin() as conn:
        if result.repeat == 1:
            values.pop("repeat")
            upsert(conn, pei_results, values, ["run_id", "evaluator"])
        else:
            upsert(conn, pei_repeats, values, ["run_id", "evaluator", "repeat"])


def stored_results(
    engine: Engine, run_ids: Sequence[str] | None = None, *, repeats: bool = False
) -> list[PeiResult]:
    """Stored ratings (of the given runs), by run, evaluator (and repeat).

    Args:
        engine: The storage's engine.
        run_ids: Only these runs' ratings (None: every run's).
        repeats: Every repeat of each rating (`pei --repeat`), not only the rating itself.
    """
    tables = [pei_results, pei_repeats] if repeats else [pei_results]
    found: list[PeiResult] = []
    with engine.connect() as conn:
        for table in tables:
            query = select(table)
            if run_ids is not None:
                query = query.where(table.c.run_id.in_(list(run_ids)))
            found += [_result(dict(row)) for row in conn.execute(query).mappings()]
    return sorted(found, key=lambda r: (r.run_id, r.evaluator, r.repeat))
