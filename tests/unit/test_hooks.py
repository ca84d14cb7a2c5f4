"""Hooks: what a before-tool hook may do, and how a failing or empty hook is reported."""

from __future__ import annotations

from typing import Any

import pytest

from contreact.config import parse_config
from contreact.extensions.hooks import Extensions, Hook, HookError, build_extensions, tool_call_info
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
    assert (decision.args, decision.vetoed_by, decision.rewritten_by) == (CALL["args"], None, None)


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
