"""Config validation: defaults, overrides, and errors that name every bad field and the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from contreact.checkpoints.storage import resolve_storage
from contreact.config import ConfigError, parse_config
from contreact.config.files import deep_merge, load_config
from contreact.graph.state import Context


def test_minimal_config_gets_the_spec_defaults() -> None:
    config = parse_config({"run_id": "a", "model": "m"})
    assert config.cycles == 10
    assert config.model_options == {"temperature": 0.6, "seed": 42, "num_ctx": 8192}
    assert (config.limits.max_steps_per_cycle, config.limits.max_tool_calls_per_cycle) == (10, 20)
    assert config.operator.mode == "auto" and config.similarity.high == 0.8
    ctx = Context.of(config, resolve_storage("/tmp/x", "postgresql+psycopg://u@h/db"))
    assert ctx.num_ctx == 8192 and ctx.ollama.timeout_s == 120 and ctx.ollama.retries == 4
    # The storage chosen on the command line reaches the nodes, not only the registry.
    assert ctx.store.url == "postgresql+psycopg://u@h/db" and str(ctx.store.data_dir) == "/tmp/x"


def test_model_options_merge_over_defaults() -> None:
    config = parse_config({"run_id": "a", "model": "m", "model_options": {"temperature": 0.1}})
    assert config.model_options == {"temperature": 0.1, "seed": 42, "num_ctx": 8192}


def test_overrides_win(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("run_id: a\nmodel: m\ncycles: 2\n")
    config = load_config(path, {"model": "other", "cycles": 5, "run_id": "b", "host": "http://h:1"})
    assert (config.model, config.cycles, config.run_id, config.ollama.host) == (
        "other",
        5,
        "b",
        "http://h:1",
    )


def test_every_problem_is_named_at_once(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("run_id: a\nmodel: m\ncycles: ten\nlimits: {max_step_per_cycle: 3}\nmodle: x\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    message = str(caught.value)
    assert message.startswith(str(path))
    assert "`cycles`" in message and "'ten'" in message
    assert "`limits.max_step_per_cycle` (did you mean `limits.max_steps_per_cycle`?)" in message
    assert "`modle` (did you mean `model`?)" in message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ({"model": "m"}, "`run_id` is required"),
        ({"run_id": "bad id!", "model": "m"}, "run id"),
        ({"run_id": "a", "model": " "}, "`model`"),
        ({"run_id": "a", "model": "m", "cycles": 0}, "`cycles`"),
        ({"run_id": "a", "model": "m", "model_options": {"num_ctx": "big"}}, "num_ctx"),
        ({"run_id": "a", "model": "m", "operator": {"mode": "email"}}, "`operator.mode`"),
        ({"run_id": "a", "model": "m", "ollama": {"timeout_s": -1}}, "`ollama.timeout_s`"),
        (["not", "a", "mapping"], "mapping"),
    ],
)
def test_bad_values_are_named(data: object, fragment: str) -> None:
    with pytest.raises(ConfigError, match=None) as caught:
        parse_config(data, "cfg.yaml")
    assert fragment in str(caught.value) and "cfg.yaml" in str(caught.value)


def test_yaml_syntax_error_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("run_id: a\nmodel: [unclosed\n")
    with pytest.raises(ConfigError, match="line"):
        load_config(path)


def test_deep_merge_merges_nested_mappings_only() -> None:
    base = {"a": {"x": 1, "y": 2}, "b": [1], "c": 3}
    assert deep_merge(base, {"a": {"y": 9}, "b": [2]}) == {"a": {"x": 1, "y": 9}, "b": [2], "c": 3}
    assert base["a"] == {"x": 1, "y": 2}
