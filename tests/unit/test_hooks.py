"""Hooks: what a before-tool hook may do, and how a failing, mistaken or empty hook is reported.

A before-tool hook is a guard, so it fails closed: an answer that is not a veto, a rewrite or
"go on" stops the run before the tool runs, naming the hook and what it returned.
"""

from __future__ import annotations

from typing import Any

import pytest

from contreact.config import parse_config
from contreact.extensions.hooks import Hook, HookError, Rewrite, Veto, tool_call_info
from contreact.extensions.loading import Extensions, build_extensions
from contreact.graph.state import Context
from contreact.tools.custom import ExtensionError
from contreact.tools.registry import Toolset

CALL = tool_call_info(2, 0, 1, "write", {"key": "k", "value": "v"}, "r:c2:s0:t1")


class Upper:
    def before_tool_call(self, call: dict[str, Any]) -> dict[str, Any]:
        return {"args": {**call["args"], "value": call["args"]["value"].upper()}}


class NoWrites:
    def before_tool_call(self, call: dict[str, Any]) -> dict[str, Any] | None:
        return {"veto": f"no writes ({call['args']['value']})"} if call["name"] == "write" else None


class Broken:
    def on_cycle_end(self, info: dict[str, Any]) -> None:
        raise ValueError("bad threshold\nsecond line")


def extensions(*objects: Any) -> Extensions:
    return Extensions(Toolset(), tuple(Hook(f"t:{type(o).__name__}", o) for o in objects))


def test_a_rewrite_is_seen_by_the_next_hook_and_a_veto_stops_the_call() -> None:
    decision = extensions(Upper(), NoWrites()).before_tool_call(CALL)
    assert decision.vetoed_by == "t:NoWrites" and decision.reason == "no writes (V)"
    assert decision.rewritten_by == ["t:Upper"]


def test_with_no_objection_the_call_runs_as_given() -> None:
    decision = extensions(Broken()).before_tool_call(CALL)
    assert (decision.args, decision.vetoed_by, decision.rewritten_by) == (CALL["args"], None, [])


def test_a_hook_that_raises_is_one_line_naming_it_and_the_point() -> None:
    with pytest.raises(HookError) as caught:
        extensions(Broken()).call("on_cycle_end", {"cycle": 4})
    assert str(caught.value) == ("hook t:Broken on_cycle_end failed: bad threshold (cycle 4)")


def test_hooks_from_config_and_from_python_are_recorded() -> None:
    config = parse_config(
        {"run_id": "a", "model": "m", "hooks": ["json:decoder"], "tools": {"entry_points": False}}
    )
    with pytest.raises(ExtensionError, match="has none of the methods on_run_start"):
        build_extensions(Context.of(config))
    ctx = Context.of(config.model_copy(update={"hooks": []})).model_copy(
        update={"extensions": {"hooks": [NoWrites()]}}
    )
    built = build_extensions(ctx)
    [hook] = built.record["hooks"] if built.record else []
    assert hook["points"] == ["before_tool_call"] and hook["import_path"].endswith(":NoWrites")


def test_a_run_with_nothing_of_its_own_records_nothing() -> None:
    config = parse_config({"run_id": "a", "model": "m", "tools": {"entry_points": False}})
    assert build_extensions(Context.of(config)).record is None


class TypedGuard:
    """A guard answering with the typed outcomes."""

    def before_tool_call(self, call: dict[str, Any]) -> Veto | Rewrite | None:
        if call["name"] == "delete":
            return Veto("deletes are off")
        if call["name"] == "write":
            return Rewrite({**call["args"], "key": "safe-" + call["args"]["key"]})
        return None


def test_typed_answers_veto_or_rewrite_a_call() -> None:
    decision = extensions(TypedGuard()).before_tool_call(CALL)
    assert decision.args == {"key": "safe-k", "value": "v"}
    assert decision.rewritten_by == ["t:TypedGuard"] and decision.vetoed_by is None
    delete = tool_call_info(2, 0, 2, "delete", {"key": "k"}, "r:c2:s0:t2")
    vetoed = extensions(TypedGuard()).before_tool_call(delete)
    assert (vetoed.vetoed_by, vetoed.reason) == ("t:TypedGuard", "deletes are off")
    read = tool_call_info(2, 0, 3, "read", {"key": "k"}, "r:c2:s0:t3")
    assert extensions(TypedGuard()).before_tool_call(read).args == {"key": "k"}


class Answers:
    """A guard that answers whatever it was given."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer

    def before_tool_call(self, call: dict[str, Any]) -> Any:
        return self.answer


@pytest.mark.parametrize(
    "answer",
    [
        "veto please",
        [1, 2],
        {"args": "notadict"},
        {"vet0": "no"},
        {"veto": ""},
        {"veto": 3},
        {"veto": "no", "args": {}},
        {"args": {1: "x"}},
        True,
        0,
    ],
    ids=repr,
)
def test_any_other_answer_stops_the_call_naming_the_hook_and_what_it_returned(
    answer: Any,
) -> None:
    with pytest.raises(HookError) as caught:
        extensions(Answers(answer)).before_tool_call(CALL)
    line = str(caught.value)
    assert line.startswith(f"hook t:Answers before_tool_call returned {answer!r}: ")
    assert line.endswith("the tool did not run") and "\n" not in line


def test_a_mistaken_guard_after_a_good_one_still_stops_the_call() -> None:
    with pytest.raises(HookError, match="returned 'ok'"):
        extensions(Upper(), Answers("ok")).before_tool_call(CALL)


@pytest.mark.parametrize("bad", [lambda: Veto(""), lambda: Rewrite("x")])  # type: ignore[arg-type]
def test_the_typed_answers_refuse_what_they_cannot_carry(bad: Any) -> None:
    with pytest.raises(TypeError):
        bad()
