"""A config's YAML aliases cannot blow it up, at any depth, in a run or a batch config.

A few lines of aliases that repeat aliases stand for billions of values; PyYAML builds
them shared and cheap, and whatever walks them afterwards (validating
`reflection.schema`, storing the config) walks every copy. Such a document is refused
in one line, naming the file and the line, before anything reads it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from contreact.config import ConfigError
from contreact.config.files import load_config
from contreact.config.yaml_file import YamlError, read_yaml
from contreact.studies.batch import load_batch

LAUGHS = """\
    a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]
    b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
    c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]
    d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]
    e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]
    f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]
    g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]
    h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]
    i: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h]
"""
"""Nine levels of nine: 9**9 (387 million) values in nine lines."""

RUN = "run_id: bomb\nmodel: m\ncycles: 1\nreflection:\n  format: json\n  schema:\n" + LAUGHS
BATCH = "batch: bomb\nmodels: [m]\nreflection:\n  format: json\n  schema:\n" + LAUGHS


def refused(error: pytest.ExceptionInfo[Exception], path: Path) -> None:
    text = str(error.value)
    assert text.startswith(f"{path}: line ") and "aliases stand for more than 100,000" in text
    assert "\n" not in text


def test_an_alias_bomb_inside_the_reflection_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "run.yaml"
    path.write_text(RUN, encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    refused(caught, path)


def test_an_alias_bomb_inside_a_batch_config_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "batch.yaml"
    path.write_text(BATCH, encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_batch(path)
    refused(caught, path)


def test_an_alias_bomb_at_the_top_level_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "top.yaml"
    path.write_text("run_id: bomb\nmodel: m\n" + LAUGHS.replace("    ", ""), encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    refused(caught, path)


def test_an_alias_to_a_value_that_contains_it_is_refused() -> None:
    with pytest.raises(YamlError, match="refers to a value that contains it"):
        read_yaml("a: &a [1, *a]\n", "loop.yaml")


def test_ordinary_aliases_still_work() -> None:
    text = "base: &base {temperature: 0.2, seed: 1}\nrun: {<<: *base, seed: 2}\nb: [*base, *base]\n"
    data = read_yaml(text, "ok.yaml")
    assert data["run"] == {"temperature": 0.2, "seed": 2}
    assert data["b"] == [data["base"], data["base"]]
    assert read_yaml("", "empty.yaml") is None
    assert read_yaml("x: [1, 2, 3]\n", "small.yaml", limit=6) == {"x": [1, 2, 3]}
    with pytest.raises(YamlError, match="more than 5 values"):
        read_yaml("x: [1, 2, 3]\n", "small.yaml", limit=5)
