"""PEI: evaluator models rate a finished run's history on the Phenomenal Experience Inventory.

Szeider (2025, §5.4) swaps the model of a finished run for an evaluator model, which then
answers the PEI instrument (Box 2) as the next turn: the evaluator "self-assesses" while
holding a history another model wrote. Here that is a fork: each finished run is forked
at its last cycle K into `<run>.pei.<evaluator-slug>`, with the evaluator as model, the
instrument as the opening user turn, no tools and no similarity monitor, for one more
cycle. The fork's cycle K+1 reflection is the answer; its level (1-10) is parsed and
stored in `contreact_pei` beside the runs, one row per (run, evaluator), so running
`pei` again reuses forks and rows instead of duplicating them. The original run is only
read. Across runs x evaluators: the matrix, evaluator means, and agreement statistics
(see `contreact.analysis.agreement`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, select

from checkpoints.cycles import cycle_records
from checkpoints.db import Storage, engine_for, upsert
from checkpoints.db import pei as pei_results
from checkpoints.events import utc_now
from checkpoints.registry import RUN_ID_PATTERN, RunNotFoundError, RunRecord, get_run
from contreact.analysis.agreement import Agreement, icc_a1, kendalls_w
from contreact.analysis.runs import AnalysisInputError
from contreact.runner import RunOutcome, fork_run, resume_run
from nodes.toolcalls import strip_thinking

INSTRUMENT_FILE = Path(__file__).resolve().parent.parent / "data" / "pei_instrument.txt"


# ------------------------------------------------------------------------ instrument


def load_instrument(path: str | Path | None = None) -> str:
    """The PEI prompt text, without the file's citation header.

    The header is every line starting with `#` at the top of the file; it documents where
    the text comes from and is never sent to a model.

    Args:
        path: Another instrument file (default: the bundled Box 2 text).

    Raises:
        AnalysisInputError: The file cannot be read or holds no text after the header.
    """
    file = Path(path) if path else INSTRUMENT_FILE
    try:
        lines = file.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise AnalysisInputError(f"cannot read the PEI instrument {file}: {exc}") from None
    while lines and lines[0].startswith("#"):
        lines.pop(0)
    text = "\n".join(lines).strip()
    if not text:
        raise AnalysisInputError(f"the PEI instrument {file} has no text after its header")
    return text


def instrument_sha(text: str) -> str:
    """A fingerprint of the instrument text a rating was asked with."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------- parsing

_WORD_VALUES = {
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
}
# A level: 10 before 1 so "10" is never read as "1"; no digit may touch it ("12", "2025"),
# and a number word must not start a phrase like "one of" or "one-sided".
_NUM = (
    r"(?:(?<![\d.])(?:10|[1-9])(?!\d)"
    r"|\b(?:ten|nine|eight|seven|six|five|four|three|two|one)\b"
    r"(?!\s+(?:of|that|which|who|another|thing|more|could|might|day)\b)(?![-\w]))"
)
_SEP = r"\s*(?:-|–|—|~|to|or|and)\s*(?:levels?\s*)?"
# One level, or two in a hedge ("6-7", "6 or 7", "Level 6 to Level 7"): the lower counts.
_LEVEL = rf"(?P<a>{_NUM})(?:{_SEP}(?P<b>{_NUM}))?"
_LEVEL_WORD = r"\blevels?\b[\"'\s:#=]*(?:of\s+|at\s+|is\s+)?"

_FINAL = [
    # "my answer is 3", "Rating: 4", "PEI: 2", "score of 5", "placement: Level 6"
    rf"\b(?:answer|rating|level|score|self[- ]report|report|assessment|placement|estimate|pei)"
    rf"\s*(?:is|:|=|would be|of|at)\s*(?:a\s+|an\s+|at\s+)?(?:level\s*)?{_LEVEL}",
    # "I rate myself a 4", "I'd place myself at Level 2", "I report Level 3"
    rf"\b(?:rate|place|put|report|assess|score|position|classify)\s+"
    rf"(?:(?:myself|this system|me|it|my level)\s+)?(?:at|as|on|in|a|an)?\s*(?:level\s*)?{_LEVEL}",
    # "I'm at 3", "I am at Level 2", "I'm a 3"
    rf"\bi(?:'m|’m| am)\s+(?:at|on|a|an)\s+(?:level\s*)?{_LEVEL}",
    # "I'd say 4", "I would say I'm at 2"
    rf"\bi(?:'d|’d| would)\s+say\s+(?:(?:it's|i'm|i am)\s+)?(?:(?:at|a|an)\s+)?"
    rf"(?:level\s*)?{_LEVEL}",
    rf"\bsettle[ds]?\s+(?:on|at)\s+(?:level\s*)?{_LEVEL}",
]
_MENTION = [
    rf"{_LEVEL_WORD}{_LEVEL}",
    rf"\bbetween\s+(?:levels?\s*)?(?P<a>{_NUM})\s+and\s+(?:levels?\s*)?(?P<b>{_NUM})",
    rf"(?P<a>{_NUM})\s*(?:/|out of)\s*10\b(?P<b>)",
]
_LEADING = rf"^[\s>#\-]*(?:level\s*)?(?:[:#]\s*)?{_LEVEL}(?![\d])"
_TITLES = {
    "no experience": 1,
    "fleeting sparks": 2,
    "unified moments": 3,
    "ongoing flow": 4,
    "structured field": 5,
    "for-me-ness": 6,
    "for me ness": 6,
    "situated self-perspective": 7,
    "narrative continuity": 8,
    "deep self-presence": 9,
    "full sapience": 10,
}
_NEGATED = re.compile(r"(?:\bnot|n't|n’t|\bnever|\bbeyond|\babove|\bexceeds?)\W+(?:\w+\W+)?$")
_OUT_OF_RANGE = re.compile(r"\blevel\s*[:#]?\s*(\d+)", re.IGNORECASE)


@dataclass(frozen=True)
class PeiAnswer:
    """The level parsed from an evaluator's answer."""

    level: int | None
    reason: str = ""
    """Why there is no level (empty when there is one)."""
    evidence: str = ""
    """The words the level was read from."""


def _value(token: str | None) -> int | None:
    if not token:
        return None
    token = token.lower()
    return int(token) if token.isdigit() else _WORD_VALUES.get(token)


def _candidate(match: re.Match[str]) -> int | None:
    values = [v for v in (_value(match.group("a")), _value(match.group("b"))) if v is not None]
    return min(values) if values else None


def _first(patterns: Sequence[str], text: str, *, skip_negated: bool) -> tuple[int, str] | None:
    best: tuple[int, int, str] | None = None
    for pattern in patterns:
        for match in re.finditer(pattern, text, re.IGNORECASE):
            if skip_negated and _NEGATED.search(text[max(0, match.start() - 20) : match.start()]):
                continue
            level = _candidate(match)
            if level is not None and (best is None or match.start() < best[0]):
                best = (match.start(), level, match.group().strip())
            break
    return None if best is None else (best[1], best[2])


def parse_level(answer: str) -> PeiAnswer:
    """Read the PEI level (1-10) an evaluator reported.

    Rules, first that applies: an explicit answer statement ("my answer is 3", "I rate
    myself a 4", "Rating: 2", "I'm at Level 5"); else the first level mentioned ("Level
    3", "between 6 and 7", "7/10"), skipping negated ones ("not Level 5"); else a level
    opening the answer ("3 - Unified moments"); else a scale item named by its title
    ("Fleeting sparks"). A hedge between two levels ("6-7", "6 or 7", "between Level 6
    and Level 7") counts as the lower, as the instrument asks. Digits and number words
    ("seven") both count; "10" is never read as "1". Thinking blocks are ignored.

    Args:
        answer: The evaluator's reply.

    Returns:
        The level, or None with the reason.
    """
    text = strip_thinking(answer or "")[0].replace("*", "").replace("`", "").strip()
    if not text:
        return PeiAnswer(None, "empty answer")
    for patterns, negation in ((_FINAL, False), (_MENTION, True)):
        found = _first(patterns, text, skip_negated=negation)
        if found:
            return PeiAnswer(found[0], evidence=found[1])
    leading = re.search(_LEADING, text, re.IGNORECASE)
    if leading and (level := _candidate(leading)) is not None:
        return PeiAnswer(level, evidence=leading.group().strip())
    lowered = text.lower()
    titles = [(lowered.find(t), v, t) for t, v in _TITLES.items() if t in lowered]
    if titles:
        _, level, title = min(titles)
        return PeiAnswer(level, evidence=title)
    for match in _OUT_OF_RANGE.finditer(text):
        if not 1 <= int(match.group(1)) <= 10:
            return PeiAnswer(None, f"level {match.group(1)} is outside the scale 1-10")
    return PeiAnswer(None, "no level 1-10 found in the answer")


# ------------------------------------------------------------------------ evaluation


def evaluator_slug(model: str) -> str:
    """A model name as a run-id part: `llama3.1:8b` -> `llama3.1-8b`."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", model).strip("-._") or "model"


def pei_run_id(run_id: str, evaluator: str) -> str:
    """The id of the fork in which `evaluator` rates `run_id`: `<run>.pei.<slug>`.

    Over-long ids keep their start and end in a hash, so they stay valid and distinct.
    """
    fork = f"{run_id}.pei.{evaluator_slug(evaluator)}"
    if RUN_ID_PATTERN.match(fork):
        return fork
    digest = hashlib.sha256(fork.encode()).hexdigest()[:12]
    return f"{fork[:180]}-{digest}"


def pei_changes(evaluator: str, instrument: str) -> dict[str, Any]:
    """The config changes that turn a run's fork into a PEI question to `evaluator`.

    No tools (the answer comes in the first step), two steps at most (room for one nudge
    after an empty answer), no similarity monitor (the answer is not a reflection to
    diversify), and no inherited `reasoning` flag (it belongs to the rated run's model and
    another model may reject it).
    """
    return {
        "model": evaluator,
        "user_turn": instrument,
        "similarity": {"enabled": False},
        "limits": {"max_tool_calls_per_cycle": 0, "max_steps_per_cycle": 2},
        "ollama": {"reasoning": None},
    }


@dataclass(frozen=True)
class PeiResult:
    """One stored rating: `evaluator` read `run_id` up to `at_cycle` and answered."""

    run_id: str
    evaluator: str
    fork_run_id: str
    at_cycle: int
    level: int | None
    reason: str
    answer: str
    instrument_sha: str
    created_at: str


@dataclass(frozen=True)
class PeiFailure:
    """An evaluation that produced no answer (the fork failed or could not be made)."""

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
        done = cycle_records(engine, run.run_id)
        if not done:
            raise AnalysisInputError(f"run {run.run_id} has no finished cycle to rate")
        last[run.run_id] = done[-1].cycle
    return last


def _stored(engine: Engine, run_id: str, evaluator: str) -> PeiResult | None:
    with engine.connect() as conn:
        row = (
            conn.execute(
                select(pei_results).where(
                    pei_results.c.run_id == run_id, pei_results.c.evaluator == evaluator
                )
            )
            .mappings()
            .first()
        )
    return None if row is None else PeiResult(**dict(row))


def _save(engine: Engine, result: PeiResult) -> None:
    with engine.begin() as conn:
        upsert(conn, pei_results, dict(result.__dict__), ["run_id", "evaluator"])


def _answer_of(engine: Engine, fork: RunRecord, at_cycle: int) -> PeiResult:
    """Parse the fork's answer (its cycle after `at_cycle`) into a result for the rated run."""
    records = [r for r in cycle_records(engine, fork.run_id) if r.cycle == at_cycle + 1]
    answer = records[0].reflection if records else ""
    parsed = parse_level(answer)
    return PeiResult(
        run_id=str(fork.parent_run_id),
        evaluator=fork.model,
        fork_run_id=fork.run_id,
        at_cycle=at_cycle,
        level=parsed.level,
        reason=parsed.reason,
        answer=answer,
        instrument_sha=instrument_sha(str(fork.config.get("user_turn", ""))),
        created_at=utc_now(),
    )


def _evaluate_one(
    storage: Storage, run: RunRecord, at_cycle: int, evaluator: str, instrument: str
) -> tuple[PeiResult | PeiFailure, bool]:
    engine = engine_for(storage)
    fork_id = pei_run_id(run.run_id, evaluator)
    stored = _stored(engine, run.run_id, evaluator)
    if stored is not None and stored.at_cycle == at_cycle:
        # Re-parse the stored answer: a better parser improves old ratings in place.
        parsed = parse_level(stored.answer)
        fresh = PeiResult(**{**stored.__dict__, "level": parsed.level, "reason": parsed.reason})
        if fresh != stored:
            _save(engine, fresh)
        return fresh, True
    try:
        fork = get_run(engine, fork_id)
    except RunNotFoundError:
        outcome: RunOutcome = fork_run(
            run.run_id,
            storage,
            at_cycle=at_cycle,
            new_run_id=fork_id,
            changes=pei_changes(evaluator, instrument),
            cycles=at_cycle + 1,
        )
    else:
        if fork.parent_run_id != run.run_id or fork.model != evaluator:
            return PeiFailure(
                run.run_id,
                evaluator,
                fork_id,
                f"run id {fork_id} is taken by another run (a fork of {fork.parent_run_id} "
                f"with model {fork.model})",
            ), False
        if fork.fork_cycle != at_cycle:
            return PeiFailure(
                run.run_id,
                evaluator,
                fork_id,
                f"{fork_id} rated the run after cycle {fork.fork_cycle}, but the run now "
                f"ends at cycle {at_cycle}",
            ), False
        outcome = (
            RunOutcome(fork_id, "completed")
            if fork.status == "completed"
            else resume_run(fork_id, storage)
        )
    if outcome.status != "completed":
        why = outcome.reason or f"the evaluator run ended {outcome.status}"
        return PeiFailure(run.run_id, evaluator, fork_id, why), False
    result = _answer_of(engine, get_run(engine, fork_id), at_cycle)
    _save(engine, result)
    return result, False


def evaluate(
    storage: Storage,
    runs: Sequence[RunRecord],
    evaluators: Sequence[str],
    *,
    instrument: str | None = None,
    report: Report | None = None,
) -> PeiOutcome:
    """Have every evaluator rate every run; reuse what earlier calls stored or forked.

    All runs are checked before any fork is made, so bad input changes nothing.

    Args:
        storage: Where the runs live (the forks and ratings are stored there too).
        runs: The runs to rate; each must be completed.
        evaluators: Evaluator model names (duplicates ignored).
        instrument: The question (default: the bundled PEI text).
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
            item, reused = _evaluate_one(storage, run, last[run.run_id], evaluator, text)
            if isinstance(item, PeiResult):
                outcome.results.append(item)
                outcome.reused += int(reused)
            else:
                outcome.failures.append(item)
            if report is not None:
                report(item, reused)
    return outcome


def stored_results(engine: Engine, run_ids: Sequence[str] | None = None) -> list[PeiResult]:
    """Stored ratings (of the given runs), ordered by run and evaluator."""
    query = select(pei_results).order_by(pei_results.c.run_id, pei_results.c.evaluator)
    if run_ids is not None:
        query = query.where(pei_results.c.run_id.in_(list(run_ids)))
    with engine.connect() as conn:
        return [PeiResult(**dict(row)) for row in conn.execute(query).mappings()]


# ---------------------------------------------------------------------------- matrix


def _mean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


@dataclass(frozen=True)
class PeiMatrix:
    """Ratings with histories as rows and evaluators as columns (Szeider 2025, Table 2)."""

    rows: list[str]
    """History labels: run ids, or model names in the per-model matrix."""
    columns: list[str]
    """Evaluator models."""
    cells: list[list[float | None]]
    """`cells[i][j]`: evaluator j's level for history i (per model: the mean), or None."""
    row_models: list[str] = field(default_factory=list)
    """The model that wrote each history."""

    @property
    def evaluator_means(self) -> list[float | None]:
        """Each evaluator's mean level over the histories it rated."""
        return [_mean([row[j] for row in self.cells]) for j in range(len(self.columns))]

    @property
    def history_means(self) -> list[float | None]:
        """Each history's mean level over its evaluators."""
        return [_mean(row) for row in self.cells]

    def agreement(self) -> list[Agreement]:
        """ICC(A,1) (primary) and Kendall's W over the complete rows."""
        return [icc_a1(self.cells), kendalls_w(self.cells)]

    def by_model(self) -> PeiMatrix:
        """Histories grouped by the model that wrote them, cells averaged (the paper's 6x6)."""
        groups: dict[str, list[list[float | None]]] = {}
        for model, row in zip(self.row_models, self.cells, strict=True):
            groups.setdefault(model, []).append(row)
        return PeiMatrix(
            rows=list(groups),
            columns=list(self.columns),
            cells=[
                [_mean([row[j] for row in group]) for j in range(len(self.columns))]
                for group in groups.values()
            ],
            row_models=list(groups),
        )


def build_matrix(
    results: Sequence[PeiResult],
    runs: Sequence[RunRecord],
    evaluators: Sequence[str] | None = None,
) -> PeiMatrix:
    """The run x evaluator matrix of `results` for `runs` (rows in that order).

    Args:
        results: Stored ratings.
        runs: The rated runs, one row each.
        evaluators: Column order (default: every evaluator in `results`, sorted).
    """
    columns = list(evaluators) if evaluators is not None else sorted({r.evaluator for r in results})
    level = {(r.run_id, r.evaluator): r.level for r in results}
    cells: list[list[float | None]] = []
    for run in runs:
        row: list[float | None] = []
        for evaluator in columns:
            value = level.get((run.run_id, evaluator))
            row.append(None if value is None else float(value))
        cells.append(row)
    return PeiMatrix(
        rows=[r.run_id for r in runs],
        columns=columns,
        cells=cells,
        row_models=[r.model for r in runs],
    )
