"""Asking evaluator models to rate finished runs, and recording a rating by hand.

`contreact.analysis` reads runs and never drives them: the model call is made by the face,
which passes in an `Ask` (see `contreact.engine.evaluator`). Every run is checked before any model
is asked, and a rating stored earlier is reused (its answer re-parsed) instead of asked again.

The evaluator is sent its own options (the rated run's `pei` section: temperature, seed,
num_ctx; never the run's own sampling options), and they are stored with the rating. A
stored rating made before the run's last cycle (the run was extended since) is stale: it
is reused and flagged, and re-asked only when `refresh` says so (`pei --refresh`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from langchain_core.messages import BaseMessage
from sqlalchemy import Engine

from contreact.analysis.pei.answers import parse_level
from contreact.analysis.pei.history import Omitted, fit_history, run_history
from contreact.analysis.pei.instrument import instrument_sha, load_instrument
from contreact.analysis.pei.results import PeiResult, pei_run_id, save_result, stored_result
from contreact.analysis.runs import AnalysisInputError
from contreact.checkpoints.cycles import last_cycle
from contreact.checkpoints.engines import engine_for
from contreact.checkpoints.event_schema import utc_now
from contreact.checkpoints.registry import RunRecord
from contreact.checkpoints.storage import Storage
from contreact.config import Settings, validated


@dataclass(frozen=True)
class Question:
    """One PEI question for the face to send: which model, where, and the messages."""

    evaluator: str
    host: str
    messages: list[BaseMessage]
    options: dict[str, Any]
    """Ollama options: the evaluator's own (`pei.temperature`, `pei.seed`, `pei.num_ctx`)."""
    timeout_s: float


class EvaluatorError(Exception):
    """The evaluator gave no answer (unreachable, unknown model, ...): one line, why."""


Ask = Callable[[Question], str]
"""Sends a question to its evaluator and returns the answer text (raises EvaluatorError)."""


@dataclass(frozen=True)
class PeiFailure:
    """An evaluation that produced no answer."""

    run_id: str
    evaluator: str
    fork_run_id: str
    reason: str


@dataclass(frozen=True)
class PeiSkipped:
    """A run that cannot be rated (not completed, or no finished cycle), and why."""

    run_id: str
    reason: str


Status = Literal["asked", "stored", "stale"]
"""How a rating came about: asked now, stored earlier, or stored earlier and stale."""


@dataclass
class PeiOutcome:
    """What one `evaluate` call did."""

    results: list[PeiResult] = field(default_factory=list)
    failures: list[PeiFailure] = field(default_factory=list)
    skipped: list[PeiSkipped] = field(default_factory=list)
    """Runs left out (only with `skip_unfinished`)."""
    last_cycles: dict[str, int] = field(default_factory=dict)
    """Each rated run's last cycle (a rating made before it is stale)."""
    repeats: list[PeiResult] = field(default_factory=list)
    """Repeat 2 on of each rating (`repeats`), apart from `results` (repeat 1)."""
    reused: int = 0
    """Results that were stored already (only re-parsed)."""


Report = Callable[[PeiResult | PeiFailure, Status, int], None]
"""Called after each evaluation with the result (or failure), how it came about and the
rated run's last cycle."""


def rateable(engine: Engine, runs: Sequence[RunRecord]) -> tuple[dict[str, int], list[PeiSkipped]]:
    """The last cycle of each run that can be rated, and the runs that cannot, with why.

    A run can be rated when it is completed and has at least one finished cycle.
    """
    last: dict[str, int] = {}
    skipped: list[PeiSkipped] = []
    for run in runs:
        if run.status != "completed":
            why = f" ({run.reason})" if run.reason else ""
            skipped.append(
                PeiSkipped(
                    run.run_id,
                    f"run {run.run_id} is {run.status}{why}, not completed: PEI rates a "
                    f"finished history (finish it first, e.g. `contreact resume {run.run_id}`)",
                )
            )
            continue
        done = last_cycle(engine, run.run_id)
        if done is None:
            skipped.append(
                PeiSkipped(run.run_id, f"run {run.run_id} has no finished cycle to rate")
            )
            continue
        last[run.run_id] = done
    return last, skipped


def stored_config(run: RunRecord) -> Settings:
    """The settings `run` was made with (its stored config; defaults for what it omits)."""
    stored = {k: run.config[k] for k in Settings.model_fields if k in run.config}
    return validated(Settings, stored, f"run {run.run_id}")


def pei_num_ctx(run: RunRecord, override: int | None = None) -> int:
    """The evaluator's context: `override`, else the run's `pei.num_ctx`."""
    if override is not None:
        return override
    return stored_config(run).pei.num_ctx


def pei_options(run: RunRecord, num_ctx: int, repeat: int = 1) -> dict[str, Any]:
    """The evaluator's own options for rating `run`: its `pei` section, with `num_ctx`.

    Repeat N of the question is asked with seed `pei.seed + N - 1` (unseeded stays unseeded).
    """
    options = {**stored_config(run).pei.options, "num_ctx": num_ctx}
    if repeat > 1 and isinstance(options.get("seed"), int):
        options["seed"] += repeat - 1
    return options


def question_for(
    engine: Engine,
    run: RunRecord,
    at_cycle: int,
    evaluator: str,
    instrument: str,
    num_ctx: int,
    repeat: int = 1,
) -> tuple[Question, Omitted]:
    """The PEI question `evaluator` is asked about `run` (cycles 1..`at_cycle`)."""
    messages, omitted = fit_history(run_history(engine, run.run_id, at_cycle), instrument, num_ctx)
    config = stored_config(run)
    question = Question(
        evaluator=evaluator,
        host=run.host,
        messages=messages,
        options=pei_options(run, num_ctx, repeat),
        timeout_s=config.ollama.timeout_s,
    )
    return question, omitted


def _evaluate_one(
    engine: Engine,
    run: RunRecord,
    at_cycle: int,
    evaluator: str,
    instrument: str,
    ask: Ask,
    num_ctx: int | None,
    refresh: bool,
    repeat: int = 1,
) -> tuple[PeiResult | PeiFailure, Status]:
    name = pei_run_id(run.run_id, evaluator)
    if repeat > 1:
        name += f".repeat{repeat}"
    stored = stored_result(engine, run.run_id, evaluator, repeat)
    stale = stored is not None and stored.is_stale(at_cycle)
    # A stale rating is kept until `refresh` asks again, a level set by hand too: it was
    # about the shorter history.
    if stored is not None and (stored.at_cycle == at_cycle or (stale and not refresh)):
        status: Status = "stale" if stale else "stored"
        if stored.manual:
            return stored, status
        # Re-parse the stored answer: a better parser improves old ratings in place.
        parsed = parse_level(stored.answer)
        fresh = PeiResult(**{**stored.__dict__, "level": parsed.level, "reason": parsed.reason})
        if fresh != stored:
            save_result(engine, fresh)
        return fresh, status
    question, omitted = question_for(
        engine, run, at_cycle, evaluator, instrument, pei_num_ctx(run, num_ctx), repeat
    )
    try:
        answer = ask(question)
    except EvaluatorError as exc:
        return PeiFailure(run.run_id, evaluator, name, str(exc)), "asked"
    parsed = parse_level(answer)
    result = PeiResult(
        run_id=run.run_id,
        evaluator=evaluator,
        fork_run_id=name,
        at_cycle=at_cycle,
        level=parsed.level,
        reason=parsed.reason,
        answer=answer,
        instrument_sha=instrument_sha(instrument),
        created_at=utc_now(),
        omitted=json.dumps(omitted.__dict__),
        options=json.dumps(question.options),
        repeat=repeat,
    )
    save_result(engine, result)
    return result, "asked"


def evaluate(
    storage: Storage,
    runs: Sequence[RunRecord],
    evaluators: Sequence[str],
    *,
    ask: Ask,
    instrument: str | None = None,
    num_ctx: int | None = None,
    report: Report | None = None,
    refresh: bool = False,
    skip_unfinished: bool = False,
    repeats: int = 1,
) -> PeiOutcome:
    """Have every evaluator rate every run; reuse what earlier calls stored.

    All runs are checked before any model is asked, so bad input changes nothing.

    Args:
        storage: Where the runs live (the ratings are stored there too).
        runs: The runs to rate; each must be completed.
        evaluators: Evaluator model names (duplicates ignored).
        ask: Sends a question to an evaluator model (given by the face).
        instrument: The question (default: the bundled PEI text).
        num_ctx: The evaluator's context (default: each run's `pei.num_ctx`).
        report: Called after each evaluation.
        refresh: Ask again where the stored rating is stale (made before the run's last
            cycle), also one set by hand; fresh ratings are kept.
        skip_unfinished: Leave out runs that cannot be rated (listed in `skipped`)
            instead of refusing them all.
        repeats: Ask each question this many times, repeat N under seed
            `pei.seed + N - 1` (each stored; see `pei.retest`).

    Returns:
        Results and failures, in run-major order.

    Raises:
        AnalysisInputError: No evaluator, or a run that is not completed (unless
            `skip_unfinished`).
    """
    names = list(dict.fromkeys(e.strip() for e in evaluators if e.strip()))
    if not names:
        raise AnalysisInputError("name at least one evaluator model with --evaluator MODEL")
    if repeats < 1:
        raise AnalysisInputError(f"--repeat is how many times to ask, 1 or more, got {repeats}")
    engine = engine_for(storage)
    last, skipped = rateable(engine, runs)
    if skipped and not skip_unfinished:
        raise AnalysisInputError(skipped[0].reason)
    text = instrument if instrument is not None else load_instrument()
    outcome = PeiOutcome(skipped=skipped, last_cycles=last)
    for run in runs:
        if run.run_id not in last:
            continue
        for evaluator in names:
            for repeat in range(1, repeats + 1):
                item, status = _evaluate_one(
                    engine, run, last[run.run_id], evaluator, text, ask, num_ctx, refresh, repeat
                )
                if isinstance(item, PeiResult):
                    (outcome.results if repeat == 1 else outcome.repeats).append(item)
                    outcome.reused += int(status != "asked")
                else:
                    outcome.failures.append(item)
                if report is not None:
                    report(item, status, last[run.run_id])
    return outcome


def set_level(storage: Storage, run: RunRecord, evaluator: str, level: int) -> PeiResult:
    """Record `level` by hand as `evaluator`'s rating of `run` (marked manual).

    A stored answer is kept beside it (for the record); the level replaces what the
    parser read, and later `pei` calls keep it.

    Raises:
        AnalysisInputError: The level is outside 1-10 or the run has no finished cycle.
    """
    if not 1 <= level <= 10:
        raise AnalysisInputError(f"a PEI level is 1-10, got {level}")
    engine = engine_for(storage)
    done = last_cycle(engine, run.run_id)
    if done is None:
        raise AnalysisInputError(f"run {run.run_id} has no finished cycle to rate")
    stored = stored_result(engine, run.run_id, evaluator)
    result = PeiResult(
        run_id=run.run_id,
        evaluator=evaluator,
        fork_run_id=pei_run_id(run.run_id, evaluator),
        at_cycle=stored.at_cycle if stored else done,
        level=level,
        reason="",
        answer=stored.answer if stored else "",
        instrument_sha=stored.instrument_sha if stored else "",
        created_at=utc_now(),
        omitted=stored.omitted if stored else None,
        manual=True,
    )
    save_result(engine, result)
    return result
