"""The dialect corpus: every family's tool-call markup is read, or gets a corrective turn.

`tests/data/toolcall_dialects.yaml` holds real model outputs (and documented formats) of
the families people run on Ollama, each with its family and source. Every case must come
out as its `expect` says; a case the parser cannot read is listed with `why` and must get
a corrective turn, never become the cycle's reflection.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from contreact.text.toolcalls import (
    INTERNAL_ERROR_PREFIX,
    FinalAnswer,
    NoAnswer,
    ToolCalls,
    parse_response,
)
from support.paths import DATA

CORPUS = yaml.safe_load((DATA / "toolcall_dialects.yaml").read_text(encoding="utf-8"))
SCHEMAS: dict[str, Any] = CORPUS["tools"]
CASES: list[dict[str, Any]] = CORPUS["cases"]
CONTREACT_TOOLS = ["write", "read", "list", "delete", "pattern_search", "send_message_to_operator"]


def test_the_corpus_spans_the_families_with_sources() -> None:
    families = {case["family"] for case in CASES}
    assert len(CASES) >= 120 and len(families) >= 30
    assert len({case["id"] for case in CASES}) == len(CASES)
    assert all(case.get("source", "").strip() for case in CASES)
    answers = [case for case in CASES if case["expect"]["outcome"] == "final"]
    assert len(answers) >= 15  # plain answers that must stay answers


@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_dialect_case(case: dict[str, Any]) -> None:
    expect = case["expect"]
    result = parse_response(case["content"], case.get("native") or [], SCHEMAS)

    if expect["outcome"] == "calls":
        assert isinstance(result, ToolCalls), result
        assert result.layer == expect["layer"]
        got = [(call.name, call.args, call.error) for call in result.calls]
        assert got == [(c["name"], c["args"], None) for c in expect["calls"]]
    elif expect["outcome"] == "final":
        assert isinstance(result, FinalAnswer), result
        assert result.text == expect["text"]
    else:
        assert isinstance(result, NoAnswer), result
        assert result.kind == expect["outcome"]
        assert not result.detail.startswith(INTERNAL_ERROR_PREFIX)
        if result.kind == "malformed":
            assert result.reason == expect["reason"]
            for tool in CONTREACT_TOOLS:  # the corrective turn names every valid tool
                assert tool in result.feedback


@pytest.mark.parametrize(
    "case",
    [case for case in CASES if "why" in case],
    ids=[case["id"] for case in CASES if "why" in case],
)
def test_what_cannot_be_read_gets_a_corrective_turn(case: dict[str, Any]) -> None:
    assert case["expect"]["outcome"] == "malformed"
    result = parse_response(case["content"], [], SCHEMAS)
    assert isinstance(result, NoAnswer) and result.kind == "malformed", result
    assert "No tool was run" in result.feedback
