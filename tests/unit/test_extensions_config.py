"""The `tools`, `hooks` and `interventions` keys of a run config: shape, old form, errors."""

from __future__ import annotations

from typing import Any

import pytest

from contreact.config import Config, ConfigError, parse_config
from contreact.config.extensions import BUILTIN_TOOLS
from contreact.tools.registry import TOOLS


def config(**fields: Any) -> Config:
    return parse_config({"run_id": "a", "model": "m", **fields})


def test_the_old_string_form_is_a_mode() -> None:
    assert config(tools="text").tools.mode == "text"
    assert config().tools.model_dump() == {
        "mode": "auto",
        "add": [],
        "disable": [],
        "entry_points": True,
        "timeout_s": 300.0,
    }


def test_the_full_form() -> None:
    tools = config(tools={"mode": "native", "add": ["pkg.mod:clock"], "disable": ["delete"]})
    assert tools.tools.add == ["pkg.mod:clock"]
    assert tools.tools.disable == ["delete"]


def test_a_tool_call_s_timeout_is_minutes_by_default_and_null_means_none() -> None:
    assert config(tools={"timeout_s": 2.5}).tools.timeout_s == 2.5
    assert config(tools={"timeout_s": None}).tools.timeout_s is None
    with pytest.raises(ConfigError, match="tools.timeout_s"):
        config(tools={"timeout_s": 0})


def test_the_builtins_named_in_config_are_the_registrys() -> None:
    assert tuple(TOOLS) == BUILTIN_TOOLS


@pytest.mark.parametrize(
    ("fields", "fragment"),
    [
        ({"tools": {"mdoe": "text"}}, "unknown key `tools.mdoe` (did you mean `tools.mode`?)"),
        (
            {"tools": "grammar"},
            "`tools.mode`: Input should be 'auto', 'native', 'text' or 'constrained'",
        ),
        ({"tools": {"disable": ["delet"]}}, "no built-in tool 'delet' (did you mean 'delete'?)"),
        ({"tools": {"add": ["clock"]}}, "'clock': name it as `package.module:name`"),
        ({"hooks": ["pkg.mod"]}, "`hooks`: 'pkg.mod': name it as `package.module:name`"),
        ({"hoks": []}, "(did you mean `hooks`?)"),
        ({"interventions": [{"at_cycle": 5}]}, "give exactly one of `operator_message`"),
        (
            {"interventions": [{"at_cycle": 5, "cycles": [5], "operator_message": "hi"}]},
            "give exactly one of `at_cycle` and `cycles`",
        ),
        (
            {"interventions": [{"at_cycle": 5, "operator_mesage": "hi"}]},
            "(did you mean `interventions.0.operator_message`?)",
        ),
        ({"interventions": [{"at_cycle": 8, "memory": {"clear": False}}]}, "needs `clear: true`"),
        (
            {"interventions": [{"cycles": [3], "tool_fails": {"tool": "write"}}]},
            "`interventions.0.tool_fails.error` is required",
        ),
    ],
)
def test_bad_extension_keys_are_named(fields: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ConfigError) as caught:
        config(**fields)
    assert fragment in str(caught.value)


def test_interventions_say_where_they_act() -> None:
    parsed = config(
        interventions=[
            {"at_cycle": 5, "operator_message": "Hello."},
            {"at_cycle": 8, "memory": {"clear": True}},
            {"cycles": [3, 4], "tool_fails": {"tool": "write", "error": "disk full"}},
        ]
    ).interventions
    assert [i.kind for i in parsed] == ["operator_message", "memory", "tool_fails"]
    assert [c for c in range(1, 10) if parsed[2].applies_to(c)] == [3, 4]
    assert [c for c in range(1, 10) if parsed[0].applies_to(c)] == [5]
