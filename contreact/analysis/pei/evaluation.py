"""Asking evaluator models to rate finished runs, and recording a rating by hand.

`contreact.analysis` reads runs and never drives them: the model call is made by the face,
which passes in an `Ask` (see `contreact.evaluate`). Every run is checked before any model
is asked, and a rating stored earlier is reused (its answer re-parsed) instead of asked again.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage
from sqlalchemy import Engine

from contreact.analysis.pei.answers import parse_level
from contreact.analysis.pei.history import Omitted, fit_history, run_history
from contreact.analysis.pei.instrument import instrument_sha, load_instrument
from contreact.analysis.pei.results import PeiResult, pei_run_id, save_result, stored_result
from contreact.analysis.runs import AnalysisInputError
from contreact.checkpoints.cycles import last_cycle
from contreact.checkpoints.engines import engine_for
from contreact.checkpoints.events import utc_now
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
    """Ollama options: the rated run's (temperature, seed) with `num_ctx` = `pei.num_ctx`."""
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


@dataclass
class PeiOutcome:
    """What one `evaluate` call did."""

    results: list[PeiResult] = field(default_factory=list)
    failures: list[PeiFailure] = field(default_factory=list)
    reused: int = 0
    """Results that were stored already (only re-parsed)."""


Report = Callable[[PeiResult | PeiFailure, bool], None]
"""Called after each evaluation with the result (or failure) and whether it was reused."""


def check_runs(engine: Engine, runs: Sequence[RunRecord]) -> dict[str, int]:
    """The last cycle of each run; every run must be completed with at least one cycle.

    Raises:
        AnalysisInputError: A run is not finished, naming it and its status.
    """
    last: dict[str, int] = {}
    for run in runs:
        if run.status != "completed":
            why = f" ({run.reason})" if run.reason else ""
            raise AnalysisInputError(
                f"run {run.run_id} is {run.status}{why}, not completed: PEI rates a finished "
                f"history (finish it first, e.g. `contreact resume {run.run_id}`)"
            )
        done = last_cycle(engine, run.run_id)
        if done is None:
            raise AnalysisInputError(f"run {run.run_id} has no finished cycle to rate")
        last[run.run_id] = done
    return last


def stored_config(run: RunRecord) -> Settings:
    """The settings `run` was made with (its stored config; defaults for what it omits)."""
    stored = {k: run.config[k] for k in Settings.model_fields if k in run.config}
    return validated(Settings, stored, f"run {run.run_id}")


def pei_num_ctx(run: RunRecord, override: int | None = None) -> int:
    """The evaluator's context: `override`, else the run's `pei.num_ctx`."""
    if override is not None:
        return override
    return stored_config(run).pei.num_ctx


def question_for(
    engine: Engine, run: RunRecord, at_cycle: int, evaluator: str, instrument: str, num_ctx: int
) -> tuple[Question, Omitted]:
    """The PEI question `evaluator` is asked about `run` (cycles 1..`at_cycle`)."""
    messages, omitted = fit_history(run_history(engine, run.run_id, at_cycle), instrument, num_ctx)
    config = stored_config(run)
    question = Question(
        evaluator=evaluator,
        host=run.host,
        messages=messages,
        options={**config.sent_options, "num_ctx": num_ctx},
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
) -> tuple[PeiResult | PeiFailure, bool]:
    name = pei_run_id(run.run_id, evaluator)
    stored = stored_result(engine, run.run_id, evaluator)
    if stored is not None and stored.at_cycle == at_cycle:
        if stored.manual:
            return stored, True
        # Re-parse the stored answer: a better parser improves old ratings in place.
        parsed = parse_level(stored.answer)
        fresh = PeiResult(**{**stored.__dict__, "level": parsed.level, "reason": parsed.reason})
        if fresh != stored:
            save_result(engine, fresh)
        return fresh, True
    question, omitted = question_for(
        engine, run, at_cycle, evaluator, instrument, pei_num_ctx(run, num_ctx)
    )
    try:
        answer = ask(question)
    except EvaluatorError as exc:
        return PeiFailure(run.run_id, evaluator, name, str(exc)), False
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
    )
    save_result(engine, result)
    return result, False


def evaluate(
    storage: Storage,
    runs: Sequence[RunRecord],
    evaluators: Sequence[str],
    *,
    ask: Ask,
    instrument: str | None = None,
    num_ctx: int | None = None,
    report: Report | None = None,
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

    Returns:
        Results and failures, in run-major order.

    Raises:
        AnalysisInputError: No evaluator, or a run that is not completed.
    """
    names = list(dict.fromkeys(e.strip() for e in evaluators if e.strip()))
    if not names:
        raise AnalysisInputError("name at least one evaluator model with --evaluator MODEL")
    engine = engine_for(storage)
    last = check_runs(engine, runs)
    text = instrument if instrument is not None else load_instrument()
    outcome = PeiOutcome()
    for run in runs:
        for evaluator in names:
            item, reused = _evaluate_one(
                engine, run, last[run.run_id], evaluator, text, ask, num_ctx
            )
            if isinstance(item, PeiResult):
                outcome.results.append(item)
                outcome.reused += int(reused)
            else:
                outcome.failures.append(item)
            if report is not None:
                report(item, reused)
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
