"""Tools of your own: schemas from type hints and docstrings, the hidden key, the toolset."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import pytest
from langchain_core.tools import InjectedToolArg

from contreact.checkpoints.persistence.memory import DictMemory
from contreact.tools.custom import ExtensionError, custom_tool, from_config, load_object
from contreact.tools.marks import tool
from contreact.tools.memory import ToolSession
from contreact.tools.registry import TOOL_SCHEMAS, Toolset


def weather(city: str, days: int = 1, idempotency_key: str = "") -> str:
    """Forecast the weather.

    Args:
        city: Where.
        days: How many days ahead.
        idempotency_key: Never shown to the model.
    """
    return f"{city} {days} {idempotency_key}"


@tool(effect="effectful", name="send")
def send_mail(to: str, key: Annotated[str, InjectedToolArg] = "") -> dict[str, Any]:
    """Send a mail.

    Args:
        to: The address.
        key: Injected (langchain-core's `InjectedToolArg`), never shown to the model.
    """
    return {"sent_to": to, "key": key}


def undocumented(x: int) -> str:
    return str(x)


def session(key: str) -> ToolSession:
    return ToolSession(run_id="r", memory=DictMemory({}), key=key)


def test_the_schema_comes_from_hints_and_docstring_without_the_key() -> None:
    built = custom_tool(weather, "tests:weather")
    assert built.schema == {
        "type": "function",
        "function": {
            "name": "weather",
            "description": "Forecast the weather.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "Where."},
                    "days": {
                        "type": "integer",
                        "description": "How many days ahead.",
                        "default": 1,
                    },
                },
                "required": ["city"],
            },
        },
    }
    assert built.effect == "pure" and built.key_parameter == "idempotency_key"


def test_the_key_reaches_the_tool_and_a_mark_names_it() -> None:
    built = custom_tool(send_mail, "tests:send_mail")
    assert (built.name, built.effect, built.key_parameter) == ("send", "effectful", "key")
    assert "key" not in built.schema["function"]["parameters"]["properties"]
    toolset = Toolset.of(custom=[built, custom_tool(weather, "tests:weather")])
    result = toolset.run("send", {"to": "a@b"}, session("r:c1:s0:t0"))
    assert result.output == '{"sent_to": "a@b", "key": "r:c1:s0:t0"}'
    assert toolset.run("weather", {"city": "Oslo"}, session("k")).output == "Oslo 1 k"


def test_identity_names_the_source_and_hashes_it() -> None:
    origin = custom_tool(weather, "tests:weather").origin
    assert origin["import_path"] == "tests:weather" and len(origin["source_sha256"]) == 64


def test_builtins_can_be_disabled_and_own_tools_follow_them() -> None:
    toolset = Toolset.of(["delete", "send_message_to_operator"], [custom_tool(weather, "t:w")])
    assert toolset.names == ["write", "read", "list", "pattern_search", "weather"]
    assert [s["function"]["name"] for s in toolset.schemas] == toolset.names
    assert set(toolset.parameter_schemas) == set(toolset.names)
    refused = toolset.run("delete", {"key": "k"}, session("k"))
    assert refused.error and "unknown tool 'delete'" in refused.output
    assert Toolset().schemas is TOOL_SCHEMAS


def test_a_name_taken_twice_is_an_error() -> None:
    clash = custom_tool(weather, "t:w", name="write")
    with pytest.raises(ExtensionError, match="like a built-in tool"):
        Toolset.of(custom=[clash])
    assert Toolset.of(["write"], [clash]).names[-1] == "write"
    with pytest.raises(ExtensionError, match="two tools are named 'weather'"):
        Toolset.of(custom=[custom_tool(weather, "a:w"), custom_tool(weather, "b:w")])


@pytest.mark.parametrize(
    ("path", "fragment"),
    [
        ("no_such_module_xyz:f", "tool no_such_module_xyz:f cannot be loaded: there is no module"),
        ("json:no_such_function", "tool json:no_such_function cannot be loaded: json has no"),
    ],
)
def test_a_tool_that_cannot_be_loaded_is_one_line(path: str, fragment: str) -> None:
    with pytest.raises(ExtensionError) as caught:
        from_config([path], entry_points=False)
    assert fragment in str(caught.value) and "\n" not in str(caught.value)


def test_a_tool_needs_a_docstring_and_must_be_a_function() -> None:
    with pytest.raises(ExtensionError, match="needs a docstring"):
        custom_tool(undocumented, "t:undocumented")
    with pytest.raises(ExtensionError, match="is a class, not a function"):
        custom_tool(load_object("json:JSONDecoder", "tool"), "json:JSONDecoder")


def test_entry_points_of_installed_packages_are_taken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "entry_point_tools.py").write_text(
        'def ping() -> str:\n    """Answer pong."""\n    return "pong"\n'
    )
    info = tmp_path / "entry_point_tools-1.2.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: entry-point-tools\nVersion: 1.2\n")
    (info / "entry_points.txt").write_text("[contreact.tools]\npinger = entry_point_tools:ping\n")
    # A name no other test's module has: a worker's other tests may have imported theirs.
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        [found] = [t for t in from_config([], entry_points=True) if t.name == "pinger"]
        assert found.origin["import_path"] == "entry_point_tools:ping"
        assert from_config([], entry_points=False) == []
    finally:
        sys.modules.pop("entry_point_tools", None)
