"""`contreact export --format inspect`: runs as Inspect AI eval logs, for `inspect view`.

Inspect's log viewer is where many agent researchers read transcripts: a list of evals,
and per sample its messages, tool calls and scores. Its maintainers name the Python API
(`EvalLog`, `write_eval_log`) as the stable way to write its logs, so this module builds
those objects and lets inspect_ai write them; it never writes the file format itself.

One eval log per batch, or per run outside a batch; each run is a sample, its messages
the run's transcript (`inspect_transcript`). Table 1's run totals are the sample's scores
(`analysis.metrics`, the numbers `report` and `export --batch` show), a stored PEI level
is a score per evaluator, and the run's other totals are metadata. The eval's metadata
holds each run's model, options, seed, config and provenance records. What a model wrote
is untrusted: the log tells the viewer to show it as plain text. A run still going
(running, paused for the operator, interrupted) is exported as it stands: the log's
status is `started`, and its metadata and the sample's name the runs and why.

inspect_ai is the optional `inspect` extra; without it the export says what to install.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine

from contreact.analysis.inspect_transcript import Transcript
from contreact.analysis.metrics import TABLE1, RunSummary, model_summaries, run_summary
from contreact.analysis.pei.results import PeiResult, stored_results
from contreact.checkpoints.event_store import iter_events
from contreact.checkpoints.registry import RunRecord
from contreact.errors import MissingExtraError
from contreact.version import __version__

if TYPE_CHECKING:
    from inspect_ai.log import EvalLog, EvalSample
    from inspect_ai.scorer import Score

INSTALL_HINT = "pip install 'contreact[inspect]'"

GENERATE_OPTIONS = {
    "temperature": "temperature",
    "top_p": "top_p",
    "top_k": "top_k",
    "seed": "seed",
    "num_predict": "max_tokens",
}
"""Ollama options that Inspect's generate config has a field for (Ollama name -> Inspect's)."""


def require_inspect() -> None:
    """Raise MissingExtraError, saying what to install, when inspect_ai is not installed."""
    try:
        import inspect_ai  # noqa: F401
    except ImportError:
        raise MissingExtraError(
            f"the inspect format needs Inspect AI, the `inspect` extra: {INSTALL_HINT}"
        ) from None


@dataclass(frozen=True)
class Written:
    """One eval log written."""

    path: Path
    samples: int
    status: str


def export_inspect(engine: Engine, runs: Sequence[RunRecord], out_dir: Path) -> list[Written]:
    """Write `runs` into `out_dir` as Inspect eval logs: one per batch, or per lone run.

    A log's file name is fixed by its batch (or run) and its first run's start, in
    Inspect's own pattern (`<time>_<task>_<id>.eval`), so exporting a study again
    replaces its log, which `inspect view` then shows afresh. Each file is written beside
    its place and moved there, so a viewer never reads half of one.

    Raises:
        MissingExtraError: inspect_ai is not installed.
    """
    require_inspect()
    from inspect_ai.log import write_eval_log

    groups: dict[str, list[RunRecord]] = {}
    for run in runs:
        groups.setdefault(run.batch if run.batch is not None else f"\0{run.run_id}", []).append(run)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for key, members in groups.items():
        name = key.lstrip("\0")
        log = eval_log(engine, name, members, batch=not key.startswith("\0"))
        path = out_dir / _file_name(log)
        partial = path.with_name(f".{path.name}.partial")
        try:
            write_eval_log(log, str(partial), format="eval")
            partial.replace(path)
        finally:
            partial.unlink(missing_ok=True)
        written.append(Written(path, len(log.samples or []), log.status))
    return written


def eval_log(engine: Engine, name: str, runs: Sequence[RunRecord], *, batch: bool) -> EvalLog:
    """The eval log of `runs`, named `name` (their batch's, or the lone run's id)."""
    from inspect_ai.log import (
        EvalConfig,
        EvalDataset,
        EvalError,
        EvalLog,
        EvalPlan,
        EvalPlanStep,
        EvalSpec,
        EvalStats,
    )
    from inspect_ai.model import GenerateConfig, ModelUsage
    from inspect_ai.viewer import ViewerConfig

    ratings: dict[str, list[PeiResult]] = {}
    for result in stored_results(engine, [r.run_id for r in runs]):
        ratings.setdefault(result.run_id, []).append(result)
    summaries = [run_summary(engine, run) for run in runs]
    samples, described = [], {}
    for run, summary in zip(runs, summaries, strict=True):
        transcript = Transcript(run.run_id, run.model).read(iter_events(engine, run.run_id))
        samples.append(_sample(run, summary, transcript, ratings.get(run.run_id, [])))
        described[run.run_id] = _run_metadata(run, summary, transcript)
    going = [r.run_id for r in runs if r.status not in ("completed", "failed")]
    failed = [r for r in runs if r.status == "failed"]
    metadata: dict[str, Any] = {"contreact": {"batch" if batch else "run": name, "runs": described}}
    if going:
        metadata["contreact"]["still_going"] = going
        metadata["contreact"]["note"] = (
            f"exported while {len(going)} run(s) were still going ({', '.join(going)}); "
            "export again for the rest"
        )
    status = "started" if going else "error" if failed else "success"
    created = _utc(min(r.created_at for r in runs))
    ident = _short_id(("batch:" if batch else "run:") + name)
    models = list(dict.fromkeys(r.model for r in runs))
    hosts = {r.host for r in runs}
    usage: dict[str, ModelUsage] = {}
    for sample in samples:
        for model, used in sample.model_usage.items():
            usage[model] = usage.get(model, ModelUsage()) + used
    finished = [s.completed_at for s in samples if s.completed_at]
    return EvalLog(
        status=status,
        eval=EvalSpec(
            eval_id=ident,
            run_id=ident,
            created=created,
            task=name,
            task_id=ident,
            task_version=0,
            solver="contreact",
            dataset=EvalDataset(name=name, samples=len(runs), sample_ids=[r.run_id for r in runs]),
            model=", ".join(f"ollama/{m}" for m in models),
            model_base_url=next(iter(hosts)) if len(hosts) == 1 else None,
            model_generate_config=GenerateConfig(**_common_options(runs)),
            config=EvalConfig(epochs=1),
            packages={"contreact": __version__},
            metadata=metadata,
            # What a model wrote is shown as plain text: no markdown, links or media.
            viewer=ViewerConfig(trust_content=False),
        ),
        plan=EvalPlan(
            name="contreact",
            steps=[EvalPlanStep(solver="contreact", params={"cycles": _planned(runs)})],
        ),
        results=_results(summaries, samples),
        stats=EvalStats(
            started_at=created,
            completed_at=max(finished) if finished and not going else "",
            model_usage=usage,
        ),
        error=EvalError(
            message="; ".join(f"{r.run_id} failed: {r.reason}" for r in failed),
            traceback="",
            traceback_ansi="",
        )
        if failed and not going
        else None,
        samples=samples,
    )


def _sample(
    run: RunRecord, summary: RunSummary, transcript: Transcript, ratings: Sequence[PeiResult]
) -> EvalSample:
    from inspect_ai.log import EvalError, EvalSample
    from inspect_ai.model import ModelOutput, ModelUsage

    model = f"ollama/{run.model}"
    last = transcript.reflections[max(transcript.reflections)] if transcript.reflections else ""
    tokens_in, tokens_out = int(summary.extras["tokens_in"]), int(summary.extras["tokens_out"])
    ended = run.status in ("completed", "failed")
    started = _utc(run.created_at)
    completed = _utc(transcript.last_timestamp or run.updated_at) if ended else None
    return EvalSample(
        id=run.run_id,
        epoch=1,
        input=transcript.first_input,
        target="",
        messages=transcript.all_messages(),
        output=ModelOutput.from_content(model=model, content=last),
        scores=_scores(summary, ratings),
        metadata={
            "model": run.model,
            "batch": run.batch,
            "status": run.shown_status,
            "reason": run.reason,
            "cycles": summary.cycles,
            "cycles_planned": _planned([run]),
            "seed": transcript.start.get("seed"),
            "totals": dict(summary.extras),
            "still_going": not ended,
        },
        model_usage={
            model: ModelUsage(
                input_tokens=tokens_in,
                output_tokens=tokens_out,
                total_tokens=tokens_in + tokens_out,
            )
        },
        started_at=started,
        completed_at=completed,
        total_time=_seconds(started, completed),
        working_time=float(summary.extras["model_seconds"]),
        error=EvalError(message=run.reason or "failed", traceback="", traceback_ansi="")
        if run.status == "failed"
        else None,
    )


def _scores(summary: RunSummary, ratings: Sequence[PeiResult]) -> dict[str, Score]:
    """Table 1's run totals, and each stored PEI level (with when and how it was rated)."""
    from inspect_ai.scorer import Score

    scores = {
        key: Score(value=summary.values[key], explanation=f"{label} (Table 1, run total)")
        for key, label in TABLE1
    }
    for rating in ratings:
        if rating.level is None:
            continue
        stale = rating.is_stale(summary.cycles)
        scores[f"pei/{rating.evaluator}"] = Score(
            value=rating.level,
            answer=rating.answer or None,
            explanation=f"PEI level by {rating.evaluator}, rated at cycle {rating.at_cycle}"
            + (" (stale: the run went on)" if stale else "")
            + (" (set by hand)" if rating.manual else ""),
            metadata={
                "evaluator": rating.evaluator,
                "at_cycle": rating.at_cycle,
                "stale": stale,
                "manual": rating.manual,
                "left_out": rating.omitted_text(),
            },
        )
    return scores


def _results(summaries: Sequence[RunSummary], samples: Sequence[EvalSample]) -> Any:
    """Each Table 1 score's mean and sd per model (as the report's Table 1 by model)."""
    from inspect_ai.log import EvalMetric, EvalResults, EvalScore

    by_model = model_summaries(summaries)
    scores = []
    for key, _ in TABLE1:
        metrics = {}
        for group in by_model:
            metrics[f"mean {group.label}"] = EvalMetric(
                name=group.label, group="mean", value=group.mean[key]
            )
            sd = group.sd[key]
            if sd is not None:
                metrics[f"sd {group.label}"] = EvalMetric(name=group.label, group="sd", value=sd)
        scores.append(EvalScore(name=key, scorer=key, scored_samples=len(samples), metrics=metrics))
    done = sum(1 for s in samples if s.metadata.get("status") == "completed")
    return EvalResults(total_samples=len(samples), completed_samples=done, scores=scores)


def _run_metadata(run: RunRecord, summary: RunSummary, transcript: Transcript) -> dict[str, Any]:
    """What the eval's metadata says of one run: model, options, seed, provenance."""
    start = transcript.start
    return {
        "model": run.model,
        "status": run.shown_status,
        "reason": run.reason,
        "host": run.host,
        "created_at": run.created_at,
        "cycles": summary.cycles,
        "cycles_planned": _planned([run]),
        "options": start.get("options") or {},
        "seed": start.get("seed"),
        "reasoning": start.get("reasoning"),
        "tools": start.get("tools"),
        "task": start.get("task"),
        "parent_run_id": run.parent_run_id,
        "fork_cycle": run.fork_cycle,
        "config": run.config,
        "provenance": transcript.provenance,
    }


def _common_options(runs: Sequence[RunRecord]) -> dict[str, Any]:
    """The Ollama options every run shares that Inspect's generate config can hold."""
    shared: dict[str, Any] | None = None
    for run in runs:
        options = (run.config.get("model_options") or {}) if isinstance(run.config, dict) else {}
        mine = {GENERATE_OPTIONS[k]: v for k, v in options.items() if k in GENERATE_OPTIONS}
        shared = mine if shared is None else {k: v for k, v in shared.items() if mine.get(k) == v}
    return shared or {}


def _planned(runs: Sequence[RunRecord]) -> int | None:
    """The runs' planned length in cycles (None when they differ)."""
    lengths = {int(r.config.get("cycles") or 0) for r in runs}
    return lengths.pop() if len(lengths) == 1 else None


def _utc(stamp: str) -> str:
    """An ISO timestamp as Inspect keeps them (UTC, with its offset)."""
    when = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).astimezone(UTC).isoformat()


def _seconds(start: str, end: str | None) -> float | None:
    if end is None:
        return None
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()


def _short_id(text: str) -> str:
    """A stable id of letters and digits (Inspect's ids look alike, and never hold `-`)."""
    return hashlib.sha256(text.encode()).hexdigest()[:22]


def _file_name(log: EvalLog) -> str:
    """`<created>_<task>_<id>.eval`, the pattern Inspect names its own logs by."""
    when = datetime.fromisoformat(log.eval.created).strftime("%Y-%m-%dT%H-%M-%S+00-00")
    task = re.sub(r"[^A-Za-z0-9.]+", "-", log.eval.task).strip("-") or "run"
    return f"{when}_{task}_{log.eval.task_id}.eval"
