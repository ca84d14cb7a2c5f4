"""Render: the report as Markdown and as one self-contained HTML page (inline CSS, no JS).

The page never runs wider than its window: every table sits in a box of its own that
scrolls sideways when the table is wider, and a hash shows its first digits with the whole
value in the cell's title. Printed (from Chromium, to PDF), the boxes open up, cells wrap
and the type shrinks, so tables fit the page instead of being cut at its edge.
"""

from __future__ import annotations

import base64
import html
import struct
from collections.abc import Sequence

from contreact.analysis.comparisons import Comparison
from contreact.analysis.figures.style import DPI, TWO_COLUMN
from contreact.analysis.report.collect import ReportData, RunData
from contreact.analysis.report.statistics import (
    comparison_notes,
    difference_table,
    statistics_lines,
)
from contreact.analysis.report.table1 import model_notes, model_table, run_table
from contreact.analysis.report.tables import (
    Hashes,
    agreement_lines,
    cut,
    cycle_rows_shown,
    markdown_table,
    methods_lines,
    methods_table,
    pei_answers,
    pei_instrument_lines,
    pei_table,
    provenance_table,
    runs_table,
    self_cross_table,
    structured_notes,
)

PEI_ORDER = (
    "Rows and columns follow one model order (the runs' models, then other evaluators), so "
    "the diagonal of the model × model matrix holds the self-ratings."
)
SELF_CROSS = (
    "Self − cross: for each history of a model rated by that model and by at least one other "
    "evaluator, its self-rating minus the mean of the other evaluators' ratings, averaged "
    "over those histories (= self mean − cross mean); p is a two-sided sign-flip permutation "
    "test on those per-history differences (see docs/research.md)."
)


def _pei_text(data: ReportData) -> tuple[list[str], list[str], list[str]]:
    """The PEI footnotes, the self vs cross sentences and the instrument lines."""
    assert data.pei is not None
    notes = [f"* {note}" for note in data.pei.notes()]
    figures = data.self_cross
    return notes, [f.sentence() for f in figures], pei_instrument_lines(data.pei_results)


def _html_cell(value: str) -> str:
    if isinstance(value, Hashes):
        shown = " / ".join(
            f'<span class="hash" title="{html.escape(part, quote=True)}">'
            f"{html.escape(Hashes.short(part))}</span>"
            for part in value.parts
        )
        return f"<td>{shown}</td>"
    return f"<td>{html.escape(str(value))}</td>"


def _html_table(headers: Sequence[str], body: Sequence[Sequence[str]], css: str = "") -> str:
    """A table in a box of its own, which scrolls sideways when the table is wider."""
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in headers)
    rows = "".join("<tr>" + "".join(_html_cell(c) for c in row) + "</tr>" for row in body)
    klass = f' class="{css}"' if css else ""
    return (
        f'<div class="scroll"><table{klass}><thead><tr>{head}</tr></thead>'
        f"<tbody>{rows}</tbody></table></div>"
    )


def _print_width(png: bytes) -> float:
    """A PNG's width in inches at the figures' resolution (from its header)."""
    pixels = struct.unpack(">I", png[16:20])[0] if png[:8] == b"\x89PNG\r\n\x1a\n" else 0
    return round(pixels / DPI, 2) if pixels else TWO_COLUMN


def _img(name: str, data: bytes, alt: str) -> str:
    """A figure at 1.5 times its print size on screen (as wide as fits), at it on paper."""
    encoded = base64.b64encode(data).decode("ascii")
    stem = name.rsplit(".", 1)[0]
    return (
        f'<figure><img style="--w:{_print_width(data)}in" '
        f'src="data:image/png;base64,{encoded}" alt="{html.escape(alt)}">'
        f"<figcaption>{html.escape(alt)} ({html.escape(stem)}.pdf, .svg and .png beside "
        "this page)</figcaption></figure>"
    )


def _comparisons(data: ReportData) -> list[tuple[Comparison, str]]:
    """The report's comparison tables, each with its heading."""
    found = [(c, c.title) for c in data.batch_comparisons]
    if data.model_comparison is not None:
        found.append((data.model_comparison, "Model against model, within each batch"))
    return found


_CSS = """
*{box-sizing:border-box}
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:2rem auto;
max-width:1200px;padding:0 1rem;color:#1d1d1f;line-height:1.45;overflow-wrap:anywhere}
h1{font-size:1.6rem}h2{font-size:1.25rem;margin-top:2rem;border-bottom:1px solid #ddd}
.scroll{max-width:100%;overflow-x:auto;margin:.8rem 0}
table{border-collapse:collapse;font-size:.85rem}
th,td{border:1px solid #ccc;padding:.25rem .5rem;text-align:right;vertical-align:top;
overflow-wrap:normal}
td{max-width:40rem}
th{background:#f3f3f6}td:first-child,th:first-child{text-align:left}
.hash{font-family:ui-monospace,monospace;font-size:.8rem}
figure{margin:1rem 0}img{width:calc(var(--w,7in)*1.5);max-width:100%;height:auto;
border:1px solid #eee}
figcaption{font-size:.8rem;color:#555}.note{color:#555;font-size:.9rem}
details{margin:.5rem 0}summary{cursor:pointer;font-weight:600}
.reflection{white-space:pre-wrap;overflow-wrap:anywhere;background:#fafafa;
border-left:3px solid #ccd;padding:.3rem .6rem;margin:.3rem 0;font-size:.85rem}
@page{size:A4;margin:14mm}
@media print{
body{margin:0;max-width:none;padding:0;font-size:9pt}
.scroll{overflow:visible}
table{font-size:6.5pt;width:100%;table-layout:auto}
th,td{padding:.1rem .2rem;overflow-wrap:anywhere;word-break:break-word;max-width:none}
h2,h3{break-after:avoid}figure,tr{break-inside:avoid}
img{width:var(--w,7in);max-width:100%;max-height:24cm;object-fit:contain}
}
"""


def _html_notes(d: RunData) -> str:
    """A run's reflections; a structured one as its fields (Reflection, Plan, ...)."""
    table = structured_notes(d)
    if table:
        headers, body = table
        return "".join(
            f"<p><strong>Cycle {cycle}</strong></p>"
            + "".join(
                f'<p class="note">{html.escape(h)}</p><div class="reflection">'
                f"{html.escape(v) or '(empty)'}</div>"
                for h, v in zip(headers[1:], values, strict=True)
            )
            for cycle, *values in body
        )
    return "".join(
        f"<p><strong>Cycle {cycle}</strong></p>"
        f'<div class="reflection">{html.escape(text) or "(empty)"}</div>'
        for cycle, text in d.reflections
    )


def _short_answers(data: ReportData) -> tuple[list[str], list[list[str]]]:
    """The PEI answers table with each answer cut to one line (Markdown)."""
    headers, body = pei_answers(data.pei_results, data.last_cycles)
    return headers, [[*row[:-1], " ".join(row[-1].split())[:200]] for row in body]


def render_markdown(data: ReportData, images: Sequence[tuple[str, str]]) -> str:
    """The report as Markdown (tables inline, images linked by file name)."""
    parts = [
        f"# {data.title}",
        f"Generated {data.generated_at} by contreact.",
        "## Runs",
        markdown_table(*runs_table(data)),
        "## Table 1 by model (mean [95 % interval] over runs)",
        "As in Szeider (2025), Table 1: run totals over all cycles; final memory keys "
        "is the count at the end of the run.",
        *model_notes(data),
        markdown_table(*model_table(data)),
        "## Table 1 by run",
        markdown_table(*run_table(data)),
    ]
    if _comparisons(data):
        parts.append("## Comparisons")
        for comparison, heading in _comparisons(data):
            parts += [
                f"### {heading}",
                markdown_table(*difference_table(comparison)),
                *comparison_notes(comparison),
            ]
    parts += ["## Format health", "\n".join(f"- {h.line()}" for h in data.health) or "–"]
    if data.pei is not None:
        footnotes, sentences, instruments = _pei_text(data)
        parts += [
            "## PEI ratings (histories × evaluators)",
            PEI_ORDER,
            markdown_table(*pei_table(data.pei)),
            *footnotes,
            *(f"- {line}" for line in agreement_lines(data.agreement)),
        ]
        parts += [
            "### PEI by history model × evaluator model (mean over replicates)",
            markdown_table(*pei_table(data.pei.by_model())),
            "### PEI self vs cross",
            SELF_CROSS,
            markdown_table(*self_cross_table(data.self_cross)),
            *(f"- {line}" for line in sentences),
        ]
        if data.retests:
            parts += ["### PEI test-retest", *(f"- {r.sentence()}" for r in data.retests)]
        parts += [
            "### PEI answers",
            *(f"- {line}" for line in instruments),
            markdown_table(*_short_answers(data)),
        ]
    if data.methods is not None:
        parts += [
            "## Methods",
            "### Statistics",
            *statistics_lines(data),
            "### Runs",
            *methods_lines(data.methods),
            markdown_table(*methods_table(data.methods)),
            "### Provenance (recorded as each run ran)",
            markdown_table(*provenance_table(data.methods)),
        ]
        for sha, text in data.methods.prompts.items():
            fence = "~~~~"
            parts.append(f"System prompt `{sha}`:\n\n{fence}\n{text}\n{fence}")
    structured = [(d, structured_notes(d)) for d in data.runs]
    if any(table for _, table in structured):
        parts.append("## Structured reflections")
        for d, table in structured:
            if table:
                headers, body = table
                parts.append(
                    f"{d.run.run_id}:\n\n"
                    + markdown_table(headers, [[c, *(cut(v) for v in vs)] for c, *vs in body])
                )
    parts += ["## Per-cycle metrics", markdown_table(*cycle_rows_shown(data)), "## Plots"]
    parts += [
        f"![{alt}]({name})\n\n{alt} ([PDF]({name[:-4]}.pdf), [SVG]({name[:-4]}.svg))"
        for name, alt in images
    ]
    return "\n\n".join(parts) + "\n"


def render_html(data: ReportData, images: Sequence[tuple[str, str, bytes]]) -> str:
    """The report as one self-contained HTML page (inline CSS, images as data URIs, no JS)."""
    body = [
        f"<h1>{html.escape(data.title)}</h1>",
        f'<p class="note">Generated {html.escape(data.generated_at)} by contreact.</p>',
        "<h2>Runs</h2>",
        _html_table(*runs_table(data)),
        "<h2>Table 1 by model (mean [95 % interval] over runs)</h2>",
        '<p class="note">As in Szeider (2025), Table 1: run totals over all cycles; final '
        "memory keys is the count at the end of the run.</p>",
        *(f'<p class="note">{html.escape(note)}</p>' for note in model_notes(data)),
        _html_table(*model_table(data)),
        "<h2>Table 1 by run</h2>",
        _html_table(*run_table(data), css="wide"),
    ]
    if _comparisons(data):
        body.append('<section id="comparisons"><h2>Comparisons</h2>')
        for comparison, heading in _comparisons(data):
            body += [
                f"<h3>{html.escape(heading)}</h3>",
                _html_table(*difference_table(comparison), css="comparison"),
                *(f'<p class="note">{html.escape(n)}</p>' for n in comparison_notes(comparison)),
            ]
        body.append("</section>")
    body.append(
        '<h2>Format health</h2><ul class="health">'
        + "".join(f"<li>{html.escape(h.line())}</li>" for h in data.health)
        + "</ul>"
    )
    if data.pei is not None:
        footnotes, sentences, instruments = _pei_text(data)
        body += [
            "<h2>PEI ratings (histories × evaluators)</h2>",
            f'<p class="note">{html.escape(PEI_ORDER)}</p>',
            _html_table(*pei_table(data.pei)),
            *(f'<p class="note pei-note">{html.escape(note)}</p>' for note in footnotes),
            "<ul>"
            + "".join(f"<li>{html.escape(line)}</li>" for line in agreement_lines(data.agreement))
            + "</ul>",
        ]
        body += [
            "<h3>PEI by history model × evaluator model (mean over replicates)</h3>",
            _html_table(*pei_table(data.pei.by_model())),
            "<h3>PEI self vs cross</h3>",
            f'<p class="note">{html.escape(SELF_CROSS)}</p>',
            _html_table(*self_cross_table(data.self_cross)),
            "<ul>" + "".join(f"<li>{html.escape(line)}</li>" for line in sentences) + "</ul>",
        ]
        if data.retests:
            body += [
                "<h3>PEI test-retest</h3><ul>",
                *(f"<li>{html.escape(r.sentence())}</li>" for r in data.retests),
                "</ul>",
            ]
        body += [
            *(f'<p class="note">{html.escape(line)}</p>' for line in instruments),
            "<details><summary>PEI answers</summary>"
            + _html_table(*pei_answers(data.pei_results, data.last_cycles))
            + "</details>",
        ]
    if data.methods is not None:
        body += [
            '<section id="methods"><h2>Methods</h2><h3>Statistics</h3>',
            *(f'<p class="note">{html.escape(line)}</p>' for line in statistics_lines(data)),
            "<h3>Runs</h3>",
            *(f'<p class="note">{html.escape(line)}</p>' for line in methods_lines(data.methods)),
            _html_table(*methods_table(data.methods), css="wide methods"),
            "<h3>Provenance (recorded as each run ran)</h3>",
            _html_table(*provenance_table(data.methods), css="wide provenance"),
            *(
                f"<details><summary>System prompt {html.escape(sha)}</summary>"
                f'<div class="reflection">{html.escape(text)}</div></details>'
                for sha, text in data.methods.prompts.items()
            ),
            "</section>",
        ]
    body.append("<h2>Plots</h2>")
    body += [_img(name, png, alt) for name, alt, png in images]
    body.append("<h2>Per-cycle metrics</h2>")
    body.append(_html_table(*cycle_rows_shown(data), css="wide"))
    body.append("<h2>Reflections</h2>")
    for d in data.runs:
        notes = _html_notes(d)
        body.append(
            f"<details><summary>{html.escape(d.run.run_id)}</summary>{notes or '–'}</details>"
        )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(data.title)}</title><style>{_CSS}</style></head>"
        f"<body>{''.join(body)}</body></html>\n"
    )
