"""Tables: the report's numbers as rows (for CSV) and as header/body text (for Markdown/HTML)."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from contreact.analysis.agreement import Agreement, describe
from contreact.analysis.metrics import (
    CYCLE_METRICS,
)
from contreact.analysis.pei.matrix import PeiMatrix
from contreact.analysis.pei.results import PeiResult
from contreact.analysis.pei.self_rating import SelfCross
from contreact.analysis.report.collect import ReportData, RunData
from contreact.analysis.report.methods import NOT_RECORDED, Methods, server_version
from contreact.text.reflection_format import fields_of

CSV_ONLY_METRICS = ("model_seconds", "nudges", "errors", "repeated_calls", "trims")
"""Per-cycle metrics the CSV holds but the Markdown and HTML tables leave out, for width."""

MARKDOWN_CYCLE_COLUMNS = (
    "run_id",
    "cycle",
    *(name for name in CYCLE_METRICS if name not in CSV_ONLY_METRICS),
    "similarity",
    "similarity_level",
    "flags",
)
"""The per-cycle columns shown in Markdown and HTML (the CSV has them all)."""


_HASH = re.compile(r"([A-Za-z0-9_-]+:)?([0-9a-f]{16,})")


class Hashes(str):
    """A cell of one or more hashes (`a / b`): shown shortened, the whole kept beside."""

    SHOWN = 12
    """Hex digits shown of each hash."""

    @property
    def parts(self) -> list[str]:
        """The hashes, whole."""
        return self.split(" / ")

    @staticmethod
    def short(value: str) -> str:
        """`sha256:0123456789ab…` of a long hash (any `kind:` prefix kept); else as it is."""
        found = _HASH.fullmatch(value)
        if found is None:
            return value
        return f"{found.group(1) or ''}{found.group(2)[: Hashes.SHOWN]}…"

    def shortened(self) -> str:
        """Every hash of the cell shortened."""
        return " / ".join(self.short(p) for p in self.parts)


def fmt(value: Any, digits: int = 1) -> str:
    """A cell as text: ints as ints, floats rounded, None as a dash."""
    if value is None or value == "":
        return "–"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return "–"
        return str(int(value)) if value.is_integer() else f"{value:.{digits}f}"
    return str(value)


def whole(value: float | None) -> float | int | None:
    """Whole numbers as int (a level of 7, not 7.0), others unchanged."""
    return int(value) if value is not None and float(value).is_integer() else value


def methods_table(methods: Methods) -> tuple[list[str], list[list[str]]]:
    """How each run was made: seed, sampling, context, digest, policies, trims."""
    headers = [
        "Run", "Model", "Replicate", "Seed", "Temperature", "num_ctx", "Other options",
        "Reasoning", "Model digest", "Operator", "Similarity", "Prompt SHA-256", "Trims",
        "Notes left out",
    ]  # fmt: skip
    shown = {"seed", "temperature", "num_ctx"}
    body = [
        [
            m.run_id,
            m.model,
            fmt(m.replicate),
            "unseeded" if m.seed is None else fmt(m.seed),
            fmt(m.temperature),
            fmt(m.num_ctx),
            ", ".join(f"{k}={v}" for k, v in sorted(m.options.items()) if k not in shown),
            fmt(m.reasoning),
            Hashes(m.digest),
            m.operator,
            m.similarity,
            Hashes(m.prompt_sha),
            str(m.trims),
            m.notes_text() or "none",
        ]
        for m in methods.runs
    ]
    return headers, body


def provenance_table(methods: Methods) -> tuple[list[str], list[list[str]]]:
    """What each run was made with, as its records say (recorded when it ran)."""
    headers = [
        "Run", "Server", "Host", "Server version", "Model details", "Template SHA-256",
        "Started", "Ended", "Resumes and extensions", "Digest changes",
        "Prompt / tools / settings SHA-256",
    ]  # fmt: skip
    body = []
    for m in methods.runs:
        first = m.first
        if first is None:
            body.append([m.run_id, NOT_RECORDED, m.host, "–", "–", "–", m.started or "–",
                         m.ended or "–", "–", "–", "–"])  # fmt: skip
            continue
        data = first.data
        details = data.get("details") or {}
        hashes = data.get("hashes") or {}
        shown = " ".join(
            str(details[k])
            for k in ("family", "parameter_size", "quantization_level")
            if details.get(k)
        )
        body.append(
            [
                m.run_id,
                m.server,
                str(data.get("host") or m.host),
                server_version(first),
                shown or str(data.get("unavailable") or "unavailable"),
                Hashes(str(data.get("template_sha256") or "unavailable")),
                m.started or "–",
                m.ended or "–",
                str(len(m.records) - 1),
                "; ".join(m.digest_changes()) or "none",
                Hashes(
                    " / ".join(
                        str(hashes.get(k, "?"))
                        for k in ("system_prompt", "tool_schemas", "settings")
                    )
                ),
            ]
        )
    return headers, body


def _by_runs(values: dict[str, str]) -> str:
    """One value for all runs, or each distinct value with the runs that had it."""
    groups: dict[str, list[str]] = {}
    for run_id, value in values.items():
        groups.setdefault(value, []).append(run_id)
    if len(groups) == 1:
        return next(iter(groups))
    return "; ".join(f"{value} ({', '.join(runs)})" for value, runs in groups.items())


def methods_lines(methods: Methods) -> list[str]:
    """The methods record's header lines: servers, libraries, limits, user turn, stub runs."""
    runs = methods.runs
    hosts = "; ".join(f"{h}: {v}" for h, v in methods.ollama_versions.items()) or "–"
    lines = [
        f"Report made by contreact {methods.contreact_version} from the runs' own records "
        "(RUN_START and PROVENANCE events, written as each run started, resumed or was "
        "extended); no host was asked when this report was made.",
        f"Servers: {hosts}.",
    ]
    stub = [m.run_id for m in runs if m.server == "stub"]
    if stub:
        which = f"Runs {', '.join(stub)} were" if len(stub) > 1 else f"Run {stub[0]} was"
        lines.append(
            f"{which} made against contreact's bundled stub (scripted answers or a GGUF file "
            "served without Ollama), not an Ollama server."
        )
    old = [m.run_id for m in runs if not m.records]
    if old:
        lines.append(f"Provenance of {', '.join(old)}: {NOT_RECORDED}.")
    recorded = {m.run_id: m.first for m in runs if m.first is not None}
    if recorded:
        versions = {
            run_id: ", ".join(f"{k} {v}" for k, v in (r.data.get("versions") or {}).items())
            for run_id, r in recorded.items()
        }
        lines.append(f"Libraries: {_by_runs(versions)}.")
    for m in runs:
        for change in m.digest_changes():
            lines.append(f"The model digest of {m.run_id} changed {change}.")
    limits = {
        m.run_id: ", ".join(f"{k}={v}" for k, v in sorted(m.limits.items())) or "defaults"
        for m in runs
    }
    if runs:
        lines.append(f"Limits: {_by_runs(limits)}.")
        lines.append(f"User turn: {_by_runs({m.run_id: repr(m.user_turn) for m in runs})}.")
        lines.append(f"Operator replies: {_by_runs({m.run_id: m.operator for m in runs})}.")
    lines.append(
        'System prompt: everything up to "Enjoy!" is Szeider (2025) Box 1 word for word; '
        "the final paragraph is the ContReAct-Ollama reference implementation's text for "
        "native tool calling (Box 1 ends with the placeholder "
        '"[Technical tool usage information follows]").'
    )
    return lines


def pei_rated_at(result: PeiResult, last_cycles: Mapping[str, int]) -> str:
    """The cycle a rating was made at, with "stale" when its run has gone on since."""
    last = last_cycles.get(result.run_id, result.at_cycle)
    if result.is_stale(last):
        return f"{result.at_cycle} of {last} (stale*)"
    return f"{result.at_cycle} of {last}"


def pei_answers(
    results: Sequence[PeiResult], last_cycles: Mapping[str, int] | None = None
) -> tuple[list[str], list[list[str]]]:
    """Every stored PEI answer, with how it was made.

    The level (manual or parsed), the cycle it was made at (stale when the run has gone on
    since), the evaluator options sent and what of the history was left out.
    """
    last = last_cycles or {}
    headers = [
        "Run",
        "Evaluator",
        "Level",
        "How",
        "Rated at cycle",
        "Evaluator options",
        "History sent",
        "Why no level",
        "Answer",
    ]
    body = [
        [
            r.run_id,
            r.evaluator,
            fmt(r.level),
            "manual" if r.manual else "parsed",
            pei_rated_at(r, last),
            r.options_text() or "–",
            r.omitted_text() or "–",
            r.reason,
            r.answer,
        ]
        for r in results
    ]
    return headers, body


def pei_instrument_lines(results: Sequence[PeiResult]) -> list[str]:
    """Which instrument text the ratings were asked with (its SHA-256), and how many each."""
    counts: dict[str, int] = {}
    for r in results:
        counts[r.instrument_sha or "not recorded (set by hand)"] = (
            counts.get(r.instrument_sha or "not recorded (set by hand)", 0) + 1
        )
    return [f"PEI instrument SHA-256 {sha}: {n} rating(s)" for sha, n in counts.items()]


def self_cross_table(figures: Sequence[SelfCross]) -> tuple[list[str], list[list[str]]]:
    """Self vs cross per model: self mean, cross mean, difference [interval], permutation p."""
    headers = [
        "Model", "Histories", "Self mean", "Cross mean", "Self − cross [95 % interval]", "p",
        "Smallest p",
    ]  # fmt: skip
    body = []
    for f in figures:
        interval = f.interval
        shown = fmt(f.difference, 2)
        if interval is not None and interval.low is not None:
            shown += f" {interval.text(2)}" + ("†" if interval.few else "")
        body.append(
            [
                f.model,
                str(f.histories),
                fmt(f.self_mean, 2),
                fmt(f.cross_mean, 2),
                shown,
                "–" if f.p_value is None else f"{f.p_value:.3g}",
                "–" if f.min_p is None else f"{f.min_p:.3g}",
            ]
        )
    return headers, body


def cycle_rows_shown(data: ReportData) -> tuple[list[str], list[list[str]]]:
    """The per-cycle table of every run, with the columns shown in Markdown/HTML."""
    body = [
        [fmt(row.get(c), 3 if c == "similarity" else 1) for c in MARKDOWN_CYCLE_COLUMNS]
        for d in data.runs
        for row in d.cycles
    ]
    return list(MARKDOWN_CYCLE_COLUMNS), body


def pei_table(matrix: PeiMatrix) -> tuple[list[str], list[list[str]]]:
    """A PEI matrix with a mean column and an evaluator-mean row."""
    headers = ["History \\ evaluator", *matrix.columns, "Mean"]

    def cell(i: int, j: int) -> str:
        stale = matrix.stale_at(i, j)
        if stale is None:
            return fmt(matrix.cells[i][j])
        return f"({fmt(stale.level)}) stale*"

    body = [
        [label, *(cell(i, j) for j in range(len(matrix.columns))), fmt(mean)]
        for i, (label, mean) in enumerate(zip(matrix.rows, matrix.history_means, strict=True))
    ]
    body.append(["Evaluator mean", *(fmt(v) for v in matrix.evaluator_means), ""])
    return headers, body


def agreement_lines(agreements: Sequence[Agreement]) -> list[str]:
    """One sentence per agreement statistic."""
    return [describe(a) for a in agreements]


def markdown_table(headers: Sequence[str], body: Sequence[Sequence[str]]) -> str:
    """A GitHub-flavoured Markdown table (pipes and newlines in cells escaped)."""

    def cell(text: str) -> str:
        shown = text.shortened() if isinstance(text, Hashes) else str(text)
        return shown.replace("|", "\\|").replace("\r", " ").replace("\n", " ")

    lines = [
        "| " + " | ".join(cell(h) for h in headers) + " |",
        "|" + "|".join("---" for _ in headers) + "|",
    ]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in body]
    return "\n".join(lines)


def runs_table(data: ReportData) -> tuple[list[str], list[list[str]]]:
    """The runs: model, batch, status, cycles, fork origin."""
    headers = ["Run", "Model", "Batch", "Status", "Cycles", "Forked from"]
    body = [
        [
            d.run.run_id,
            d.run.model,
            d.run.batch or "",
            d.run.status + (f" ({d.run.reason})" if d.run.reason else ""),
            str(d.summary.cycles),
            f"{d.run.parent_run_id} @ {d.run.fork_cycle}" if d.run.parent_run_id else "",
        ]
        for d in data.runs
    ]
    return headers, body


def cut(text: str, limit: int = 200) -> str:
    """`text` on one line, at most `limit` characters (for Markdown cells)."""
    return " ".join(text.split())[:limit]


def structured_notes(d: RunData) -> tuple[list[str], list[list[str]]] | None:
    """A run's structured reflections as a table: the cycle, then one column per field.

    None for a run whose reflections are text (`reflection.format` is not `json`). A note
    that closed its cycle without being valid JSON stands whole in the first field's column.
    """
    if (d.run.config.get("reflection") or {}).get("format") != "json":
        return None
    rows = [(cycle, text, fields_of(text)) for cycle, text in d.reflections]
    names: list[str] = []
    for _, _, fields in rows:
        names += [k for k in fields or {} if k not in names]
    names = names or ["reflection"]

    def shown(value: Any) -> str:
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)

    body = [
        [str(cycle), *(shown(fields.get(n, "")) for n in names)]
        if fields is not None
        else [str(cycle), text, *("" for _ in names[1:])]
        for cycle, text, fields in rows
    ]
    return ["Cycle", *(n.replace("_", " ").capitalize() for n in names)], body
