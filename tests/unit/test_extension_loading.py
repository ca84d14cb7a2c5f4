"""Loading a config's tools and hooks: one line for every failure, with a "did you mean".

A tool or hook is named `package.module:name`; whatever stops it from loading (a misspelt
module or attribute, a module that fails as it is imported, a class given as a hook whose
methods need an instance) is one line naming the tool or hook, never an exception class,
before the run moves. A module in the config's own folder is importable without
PYTHONPATH, and never shadows an installed module of the same name.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from contreact.config import parse_config
from contreact.config.files import load_config
from contreact.extensions.loading import build_extensions
from contreact.graph.state import Context
from contreact.tools.custom import ExtensionError, load_object

PROBE = '''
def probe(text: str) -> str:
    """Echo the text.

    Args:
        text: What to echo.
    """
    return text
'''


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A folder for modules of a test's own, and the import state restored after it."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    before = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - before:
        sys.modules.pop(name, None)


def line_of(path: str, what: str = "tool", folders: tuple[str, ...] = ()) -> str:
    with pytest.raises(ExtensionError) as caught:
        load_object(path, what, folders)
    text = str(caught.value)
    assert "\n" not in text and "Error" not in text, text
    return text


def test_a_misspelt_attribute_is_one_line_with_did_you_mean(folder: Path) -> None:
    (folder / "advt_tools.py").write_text(PROBE, encoding="utf-8")
    assert line_of("advt_tools:prbe", folders=(str(folder),)) == (
        "tool advt_tools:prbe cannot be loaded: advt_tools has no prbe (did you mean probe?)"
    )


def test_a_misspelt_module_is_one_line_with_did_you_mean(folder: Path) -> None:
    package = folder / "lab"
    package.mkdir()
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "raises.py").write_text(PROBE, encoding="utf-8")
    line = line_of("lab.raisez:probe", "hook", (str(folder),))
    assert line.startswith(
        "hook lab.raisez:probe cannot be loaded: there is no module lab.raisez "
        "(did you mean lab.raises?)"
    ), line
    assert "json has no JSONDecodr (did you mean JSONDecoder?)" in line_of("json:JSONDecodr")


def test_a_module_that_fails_as_it_is_imported_is_one_line(folder: Path) -> None:
    (folder / "needs_more.py").write_text("import not_installed_xyz\n", encoding="utf-8")
    (folder / "divides.py").write_text("x = 1 / 0\n", encoding="utf-8")
    (folder / "broken_syntax.py").write_text("def f(:\n", encoding="utf-8")
    dirs = (str(folder),)
    assert line_of("needs_more:f", folders=dirs) == (
        "tool needs_more:f cannot be loaded: needs_more imports not_installed_xyz, "
        "which is not installed"
    )
    assert line_of("divides:f", folders=dirs) == (
        "tool divides:f cannot be loaded: importing divides failed: division by zero"
    )
    assert line_of("broken_syntax:f", folders=dirs).startswith(
        f"tool broken_syntax:f cannot be loaded: {folder / 'broken_syntax.py'} line 1: "
    )


class NeedsSelf:
    """A hook class whose method takes `self`: it works only as an instance."""

    def on_cycle_end(self, info: dict[str, object]) -> None:
        """Nothing."""


class Static:
    """A hook class whose methods are static: the class itself is the hook."""

    @staticmethod
    def on_cycle_end(info: dict[str, object]) -> None:
        """Nothing."""


needs_self = NeedsSelf()


def hooks_config(*hooks: str) -> Context:
    config = parse_config(
        {"run_id": "a", "model": "m", "hooks": list(hooks), "tools": {"entry_points": False}}
    )
    return Context.of(config)


def test_a_hook_class_whose_methods_need_self_is_refused_at_loading() -> None:
    with pytest.raises(ExtensionError) as caught:
        build_extensions(hooks_config(f"{__name__}:NeedsSelf"))
    assert str(caught.value) == (
        f"hook {__name__}:NeedsSelf is a class whose on_cycle_end take `self`: name an "
        "instance instead (`guard = NeedsSelf()` in its module, then `module:guard`), or "
        "make those methods static"
    )
    built = build_extensions(hooks_config(f"{__name__}:Static", f"{__name__}:needs_self"))
    assert [h.source for h in built.hooks] == [f"{__name__}:Static", f"{__name__}:needs_self"]


def test_a_tool_beside_the_config_loads_without_pythonpath(folder: Path) -> None:
    (folder / "beside_tools.py").write_text(PROBE, encoding="utf-8")
    config = folder / "run.yaml"
    config.write_text(
        "run_id: a\nmodel: m\ntools: {add: ['beside_tools:probe'], entry_points: false}\n",
        encoding="utf-8",
    )
    loaded = load_config(config)
    assert loaded.import_dirs == [str(folder.resolve())]
    assert list(build_extensions(Context.of(loaded)).toolset.custom) == ["probe"]


def test_a_module_beside_the_config_never_shadows_an_installed_one(folder: Path) -> None:
    # `colorsys` is installed (the standard library's): a colorsys.py beside the config is
    # not what `colorsys:rgb_to_hsv` loads.
    (folder / "colorsys.py").write_text(
        PROBE.replace("def probe", "def rgb_to_hsv"), encoding="utf-8"
    )
    sys.modules.pop("colorsys", None)
    found = load_object("colorsys:rgb_to_hsv", "tool", [str(folder)])
    assert Path(inspect.getfile(found)).parent != folder
