"""How long the layered tool-call parser takes on large and adversarial model output.

Real model messages are a few kB; this measures the parser on 50 kB inputs built to
defeat naive scanners (deeply nested or unclosed braces, many `{"name":` prefixes, tag
and ReAct floods), so a regression to quadratic-or-worse behaviour shows up as figures.
The figure is the slowest input's median parse time (information: no target).
Run: `.venv/bin/python benchmarks/cost/parser_speed.py [--quick]`.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

# The shared helpers (common.py, ...) are in benchmarks/, the folder above this one.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import Figure, parser, report

from contreact.text.toolcalls import parse_response
from contreact.tools.registry import PARAMETER_SCHEMAS


def inputs(size: int) -> dict[str, str]:
    """Named inputs of about `size` characters."""
    unit = '{"name": "write", "arguments": {"key": "k", "value": "v"}} '
    return {
        "typical-call (60 B)": unit,
        "many-valid-calls": unit * (size // len(unit)),
        "nested-objects": '{"a": ' * (size // 6),
        "open-braces": "{" * size,
        "name-prefixes": '{"name": ' * (size // 9),
        "tool-call-tags": "<tool_call>" * (size // 11),
        "action-lines": "Action: read\n" * (size // 13),
        "plain-prose": "The agent thinks about prime gaps. " * (size // 35),
        # Floods of each dialect's markup (nodes/toolcalls/layers/dialects.py and more).
        "mistral-tokens": "[TOOL_CALLS]a" * (size // 13),
        "deepseek-call-begins": "<｜tool▁call▁begin｜>" * (size // 19),
        "kimi-call-begins": "<|tool_call_begin|>" * (size // 19),
        "harmony-messages": "<|channel|>x<|message|>" * (size // 23),
        "pythonic-unbalanced": "[a(" * (size // 3),
        "pythonic-deep-parens": "[a(" + "(" * size,
        "function-tags": "<function=a>" * (size // 12),
        "invoke-params": '<invoke name="a"><parameter name="b">' * (size // 38),
        "recipient-lines": ">>>a\n" * (size // 5),
        "xml-agent-tags": "<tool>a</tool><tool_input>" * (size // 26),
        "tool-code-fences": "```tool_code\n" * (size // 13),
        "special-token-starts": "<|" * (size // 2),
        "glm-arg-keys": "<tool_call>a" + "<arg_key>k</arg_key><arg_value>" * (size // 31),
        "whole-message-call": "write(" * (size // 6) + ")",
        "call-colon-opens": "<start_function_call>call:a{" * (size // 28),
        "call-colon-nesting": "<|tool_call>call:a{" + "b:{" * (size // 3),
    }


def main() -> None:
    """Print the median parse time per input."""
    args = parser(__doc__.splitlines()[0]).parse_args()  # --quick: smaller inputs, fewer repeats
    size, repeats = (10_000, 2) if args.quick else (50_000, 5)
    print(f"{'input':28s} {'chars':>8s} {'median s':>10s}")
    slowest = ("", 0.0)
    for name, text in inputs(size).items():
        times = []
        for _ in range(repeats):
            started = time.perf_counter()
            parse_response(text, [], PARAMETER_SCHEMAS)
            times.append(time.perf_counter() - started)
        took = statistics.median(times)
        print(f"{name:28s} {len(text):8d} {took:10.4f}")
        slowest = max(slowest, (name, took), key=lambda found: found[1])
    label = f"slowest parse of a {size:,}-character input"
    report([Figure("P", label, slowest[1], "s", note=slowest[0])], args.json)


if __name__ == "__main__":
    main()
