"""Reading a run config from its YAML file: overrides from the command line, merges.

The settings model (`contreact.config`) validates plain data; this module turns a file
into that data, applies the command line's overrides and inlines files a config names, so
a run's stored config needs no file to be resumed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from contreact.config import Config, ConfigError, parse_config
from contreact.config.yaml_file import YamlError, read_yaml


def load_config(path: str | Path, overrides: dict[str, Any] | None = None) -> Config:
    """Read a YAML config, apply CLI overrides (`model`, `cycles`, `run_id`, `host`), validate."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config {file}: {exc.strerror or exc}") from None
    try:
        data = read_yaml(text, str(file))
    except YamlError as exc:
        raise ConfigError(str(exc)) from None
    if data is None:
        data = {}
    if isinstance(data, dict):
        data = apply_overrides(data, overrides or {})
        data = _read_replies_file(data, file)
        data = with_import_dirs(data, file)
    return parse_config(data, str(file))


def with_import_dirs(data: dict[str, Any], config_file: Path) -> dict[str, Any]:
    """`data` with its `import_dirs` made absolute, the config file's own folder among them.

    A tool module written beside the config is then importable wherever the command runs,
    and so on `resume`, whose stored config keeps the folders. A config that lists
    `import_dirs` itself says where to look, and its own folder is not added.
    """
    folder = config_file.expanduser().resolve().parent
    given = data.get("import_dirs")
    if given is None:
        return {**data, "import_dirs": [str(folder)]}
    if not isinstance(given, list):
        return data  # the settings model names the mistake
    return {
        **data,
        "import_dirs": [
            str((folder / Path(d).expanduser()).resolve()) if isinstance(d, str) else d
            for d in given
        ],
    }


def _read_replies_file(data: dict[str, Any], config_file: Path) -> dict[str, Any]:
    """Inline `operator.replies_file` as `operator.replies`, so a resumed run needs no file."""
    operator = data.get("operator")
    if not isinstance(operator, dict) or not operator.get("replies_file"):
        return data
    path = Path(str(operator["replies_file"]))
    if not path.is_absolute():
        path = config_file.parent / path
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ConfigError(
            f"{config_file}: `operator.replies_file`: cannot read {path} ({exc.strerror or exc})"
        ) from None
    replies = [line.strip() for line in lines if line.strip()]
    return {**data, "operator": {**operator, "replies": replies, "replies_file": str(path)}}


def apply_overrides(data: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """CLI flags over the file's values (None means the flag was not given)."""
    merged = dict(data)
    for key in ("model", "cycles", "run_id"):
        if overrides.get(key) is not None:
            merged[key] = overrides[key]
    if overrides.get("host") is not None:
        ollama = dict(merged.get("ollama") or {})
        ollama["host"] = overrides["host"]
        merged["ollama"] = ollama
    return merged


def deep_merge(base: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """`base` with `changes` applied; nested mappings merge, other values replace."""
    merged = dict(base)
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged
