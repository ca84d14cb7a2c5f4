"""Per-family table of the tool-call dialect corpus: how many cases the parser reads.

For every model family in `tests/data/toolcall_dialects.yaml`: its cases, how many come
out as expected by being read (calls found, or an answer kept as the reflection), how
many get the expected corrective turn (unreadable, echoed placeholders: listed with
`why` or `reason`), and how many come out wrong (anything else; the test suite holds this
at zero). The figure is that count of wrong cases. The corpus parses in about a second, so
`--quick` is the whole of it. Run: `.venv/bin/python benchmarks/reports/parser_corpus_table.py
[--wrong]`.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from typing import Any

# The shared helpers (common.py, ...) are in benchmarks/, the folder above this one.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import yaml
from common import Figure, parser, report

from contreact.text.toolcalls import FinalAnswer, NoAnswer, Parsed, ToolCalls, parse_response

CORPUS = Path(__file__).resolve().parents[2] / "tests" / "data" / "toolcall_dialects.yaml"


def verdict(case: dict[str, Any], result: Parsed) -> str:
    """`read`, `corrective` or `wrong` for one case's parse result."""
    expect = case["expect"]
    outcome = expect["outcome"]
    if outcome == "calls" and isinstance(result, ToolCalls):
        got = [(c.name, c.args, c.error) for c in result.calls]
        want = [(c["name"], c["args"], None) for c in expect["calls"]]
        return "read" if got == want and result.layer == expect["layer"] else "wrong"
    if outcome == "final" and isinstance(result, FinalAnswer):
        return "read" if result.text == expect["text"] else "wrong"
    if outcome in ("empty", "malformed") and isinstance(result, NoAnswer):
        if result.kind == outcome and (outcome == "empty" or result.reason == expect["reason"]):
            return "corrective"
    return "wrong"


def main() -> None:
    """Print the table (and, with --wrong, every case that came out wrong)."""
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--wrong", action="store_true", help="list the wrong cases")
    args = p.parse_args()
    corpus = yaml.safe_load(CORPUS.read_text(encoding="utf-8"))
    rows: dict[str, Counter[str]] = {}
    wrong: list[str] = []
    for case in corpus["cases"]:
        result = parse_response(case["content"], case.get("native") or [], corpus["tools"])
        judged = verdict(case, result)
        rows.setdefault(case["family"], Counter())[judged] += 1
        if judged == "wrong":
            wrong.append(f"{case['id']}: {result!r:.200}")
    print(f"| {'family':22s} | cases | read | corrective | wrong |")
    print(f"|{'-' * 24}|-------|------|------------|-------|")
    total: Counter[str] = Counter()
    for family, counts in rows.items():
        total.update(counts)
        cases = sum(counts.values())
        print(
            f"| {family:22s} | {cases:5d} | {counts['read']:4d} | "
            f"{counts['corrective']:10d} | {counts['wrong']:5d} |"
        )
    print(
        f"| {'total (' + str(len(rows)) + ' families)':22s} | {sum(total.values()):5d} | "
        f"{total['read']:4d} | {total['corrective']:10d} | {total['wrong']:5d} |"
    )
    if args.wrong:
        print("\n".join(wrong))
    cases = sum(total.values())
    report([Figure("T", f"corpus cases read wrong, of {cases}", len(wrong), "", 0)], args.json)


if __name__ == "__main__":
    main()
