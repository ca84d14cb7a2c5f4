"""PEI: evaluator models rate a finished run's history on the Phenomenal Experience Inventory.

Szeider (2025, §5.4) hands the conversation history of a finished run to an evaluator
model, which then answers the PEI instrument (Box 2) as the next turn: the evaluator
"self-assesses" while holding a history another model lived. The ContReAct-Ollama
reference implementation sends the whole message log. Here the history is rebuilt from
the run's event log (the checkpointed state holds only the current cycle, by design), in
order, as the agent lived it: the system prompt, then every cycle's opening turn, each
model answer with its tool calls, each tool result (operator exchanges are the results of
`send_message_to_operator`), corrective turns, and the answer that closed the cycle (its
reflection); thinking is left out, as the agent never saw it again. The instrument is the
last user turn; no tools are offered.

What is left out when the history does not fit `pei.num_ctx` (minus an answer reserve),
in this order until it fits: (1) the working steps (tool calls, results, corrective
turns) of the oldest cycles, keeping each cycle's opening turn and reflection; (2) whole
cycles, oldest first. The system prompt, the instrument and the last cycle's reflection
always stay. What was left out is stored with the answer and shown in reports.

The model call itself is not made here: `contreact.analysis` reads runs and never drives
them, so the face passes in an `Ask` (see `contreact.evaluate`). One row per (run,
evaluator) is stored in `contreact_pei`, so running `pei` again reuses stored answers
(re-parsing them) instead of asking again; a level set by hand (`pei --set`) is marked
manual and kept. Across runs x evaluators: the matrix, evaluator means, and agreement
statistics (see `contreact.analysis.agreement`).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from sqlalchemy import Engine, select

from contreact.analysis.agreement import Agreement, icc_a1, kendalls_w
from contreact.analysis.runs import AnalysisInputError, events_of_type
from contreact.checkpoints.cycles import cycle_records
from contreact.checkpoints.engines import engine_for
from contreact.checkpoints.events import utc_now
from contreact.checkpoints.registry import RUN_ID_PATTERN, RunRecord
from contreact.checkpoints.schema import pei as pei_results
from contreact.checkpoints.statements import upsert
from contreact.checkpoints.storage import Storage
from contreact.graph.defaults import PEI_NUM_CTX
from contreact.nodes.context_budget import message_tokens
from contreact.nodes.toolcalls import strip_thinking

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


# --------------------------------------------------------------------------- history

ANSWER_RESERVE_TOKENS = 1024
"""Tokens of `pei.num_ctx` kept free for the evaluator's answer."""


@dataclass
class CycleTurns:
    """One cycle of a rated run, as the agent lived it."""

    cycle: int
    opening: list[BaseMessage] = field(default_factory=list)
    """The turns before the cycle's first model answer (its opening user turn)."""
    steps: list[BaseMessage] = field(default_factory=list)
    """Tool calls, tool results and corrective turns."""
    final: list[BaseMessage] = field(default_factory=list)
    """The answer that closed the cycle (its reflection)."""


@dataclass(frozen=True)
class History:
    """A run's conversation up to a cycle: the system prompt and every cycle's turns."""

    system: str
    cycles: list[CycleTurns]


def _message(logged: dict[str, Any]) -> BaseMessage | None:
    role, content = logged.get("role"), str(logged.get("content") or "")
    if role == "user":
        return HumanMessage(content)
    if role == "tool":
        return ToolMessage(content, tool_call_id=str(logged.get("tool_call_id") or ""))
    if role == "assistant":
        return AIMessage(content)
    return None


def run_history(engine: Engine, run_id: str, at_cycle: int) -> History:
    """The conversation of `run_id`'s cycles 1..`at_cycle`, rebuilt from its LLM_INVOCATIONs.

    Each invocation logs the messages new since the previous call and the answer; the
    system message is logged whole in cycle 1 (later by reference), and that text, the
    prompt before any reflection, is the history's system prompt.
    """
    system = ""
    cycles: dict[int, CycleTurns] = {}
    for cycle, _, payload in events_of_type(engine, run_id, ("LLM_INVOCATION",)):
        if cycle > at_cycle:
            continue
        turns = cycles.setdefault(cycle, CycleTurns(cycle))
        step = int(payload.get("step") or 0)
        for logged in payload.get("new_messages") or []:
            if logged.get("role") == "system":
                if not system and isinstance(logged.get("content"), str):
                    system = logged["content"]
                continue
            message = _message(logged)
            if message is not None:
                (turns.opening if step == 0 and not turns.final else turns.steps).append(message)
        response = payload.get("response") or {}
        calls = [
            {"name": c["name"], "args": c.get("args") or {}, "id": f"c{cycle}-s{step}-t{i}"}
            for i, c in enumerate(response.get("tool_calls") or [])
        ]
        answer = AIMessage(str(response.get("content") or ""), tool_calls=calls)
        turns.steps.extend(turns.final)
        turns.final = [answer]
    for turns in cycles.values():
        if turns.final and turns.final[0].tool_calls:  # type: ignore[attr-defined]
            # The cycle ended on a budget, not on an answer: its last call is a step too.
            turns.steps.extend(turns.final)
            turns.final = []
    return History(system, [cycles[c] for c in sorted(cycles)])


@dataclass(frozen=True)
class Omitted:
    """What of a history was left out to fit the evaluator's context."""

    steps_of_cycles: list[int]
    """Cycles whose working steps were left out (opening turn and reflection kept)."""
    cycles: list[int]
    """Cycles left out entirely."""
    tokens: int
    """The estimated prompt tokens of what was sent."""
    budget: int
    """`pei.num_ctx` minus the answer reserve."""

    @property
    def anything(self) -> bool:
        """Whether anything was left out."""
        return bool(self.steps_of_cycles or self.cycles)

    def describe(self) -> str:
        """One line for tables: what was left out, or that the whole history was sent."""
        parts = []
        if self.steps_of_cycles:
            parts.append(f"steps of cycles {_spans(self.steps_of_cycles)}")
        if self.cycles:
            parts.append(f"cycles {_spans(self.cycles)} entirely")
        if not parts:
            return f"whole history (~{self.tokens} of {self.budget} tokens)"
        return f"left out: {'; '.join(parts)} (~{self.tokens} of {self.budget} tokens)"


def _spans(numbers: Sequence[int]) -> str:
    spans: list[str] = []
    for n in sorted(numbers):
        if spans and spans[-1].split("-")[-1] == str(n - 1):
            spans[-1] = f"{spans[-1].split('-')[0]}-{n}"
        else:
            spans.append(str(n))
    return ", ".join(spans)


def fit_history(
    history: History, instrument: str, num_ctx: int
) -> tuple[list[BaseMessage], Omitted]:
    """The messages to send (system, history, instrument) within `num_ctx`, and what was left out.

    The rule (see the module docstring): working steps of the oldest cycles first, then
    whole cycles oldest first; the system prompt, the instrument and the last cycle's
    reflection always stay.
    """
    budget = max(0, num_ctx - ANSWER_RESERVE_TOKENS)
    system = SystemMessage(history.system)
    question = HumanMessage(instrument)
    cycles = history.cycles
    cost = {id(m): message_tokens(m) for c in cycles for m in (*c.opening, *c.steps, *c.final)}
    fixed = message_tokens(system) + message_tokens(question)
    no_steps: set[int] = set()
    dropped: set[int] = set()

    def total() -> int:
        tokens = fixed
        for c in cycles:
            if c.cycle in dropped:
                continue
            kept = (
                [*c.opening, *c.final] if c.cycle in no_steps else [*c.opening, *c.steps, *c.final]
            )
            tokens += sum(cost[id(m)] for m in kept)
        return tokens

    tokens = total()
    for c in cycles:
        if tokens <= budget:
            break
        if c.steps:
            no_steps.add(c.cycle)
            tokens = total()
    for c in cycles[:-1]:
        if tokens <= budget:
            break
        dropped.add(c.cycle)
        tokens = total()
    messages: list[BaseMessage] = [system]
    for c in cycles:
        if c.cycle in dropped:
            continue
        messages += c.opening
        if c.cycle not in no_steps:
            messages += c.steps
        messages += c.final
    messages.append(question)
    return messages, Omitted(sorted(no_steps - dropped), sorted(dropped), tokens, budget)


# ------------------------------------------------------------------------ evaluation


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

    def omitted_text(self) -> str:
        """What was left out, in words ("" when unknown)."""
        if not self.omitted:
            return ""
        return Omitted(**json.loads(self.omitted)).describe()


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
    return None if row is None else _result(dict(row))


def _result(row: dict[str, Any]) -> PeiResult:
    row["manual"] = bool(row.get("manual"))
    return PeiResult(**row)


def _save(engine: Engine, result: PeiResult) -> None:
    with engine.begin() as conn:
        upsert(conn, pei_results, dict(result.__dict__), ["run_id", "evaluator"])


def pei_num_ctx(run: RunRecord, override: int | None = None) -> int:
    """The evaluator's context: `override`, else the run's `pei.num_ctx`, else the default."""
    if override is not None:
        return override
    configured = (run.config.get("pei") or {}).get("num_ctx")
    return int(configured) if isinstance(configured, int) else PEI_NUM_CTX


def question_for(
    engine: Engine, run: RunRecord, at_cycle: int, evaluator: str, instrument: str, num_ctx: int
) -> tuple[Question, Omitted]:
    """The PEI question `evaluator` is asked about `run` (cycles 1..`at_cycle`)."""
    messages, omitted = fit_history(run_history(engine, run.run_id, at_cycle), instrument, num_ctx)
    options = dict(run.config.get("model_options") or {})
    options["num_ctx"] = num_ctx
    timeout = float((run.config.get("ollama") or {}).get("timeout_s") or 120.0)
    question = Question(
        evaluator=evaluator,
        host=run.host,
        messages=messages,
        options={k: v for k, v in options.items() if v is not None},
        timeout_s=timeout,
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
    stored = _stored(engine, run.run_id, evaluator)
    if stored is not None and stored.at_cycle == at_cycle:
        if stored.manual:
            return stored, True
        # Re-parse the stored answer: a better parser improves old ratings in place.
        parsed = parse_level(stored.answer)
        fresh = PeiResult(**{**stored.__dict__, "level": parsed.level, "reason": parsed.reason})
        if fresh != stored:
            _save(engine, fresh)
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
    _save(engine, result)
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
    done = cycle_records(engine, run.run_id)
    if not done:
        raise AnalysisInputError(f"run {run.run_id} has no finished cycle to rate")
    stored = _stored(engine, run.run_id, evaluator)
    result = PeiResult(
        run_id=run.run_id,
        evaluator=evaluator,
        fork_run_id=pei_run_id(run.run_id, evaluator),
        at_cycle=stored.at_cycle if stored else done[-1].cycle,
        level=level,
        reason="",
        answer=stored.answer if stored else "",
        instrument_sha=stored.instrument_sha if stored else "",
        created_at=utc_now(),
        omitted=stored.omitted if stored else None,
        manual=True,
    )
    _save(engine, result)
    return result


def stored_results(engine: Engine, run_ids: Sequence[str] | None = None) -> list[PeiResult]:
    """Stored ratings (of the given runs), ordered by run and evaluator."""
    query = select(pei_results).order_by(pei_results.c.run_id, pei_results.c.evaluator)
    if run_ids is not None:
        query = query.where(pei_results.c.run_id.in_(list(run_ids)))
    with engine.connect() as conn:
        return [_result(dict(row)) for row in conn.execute(query).mappings()]


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
