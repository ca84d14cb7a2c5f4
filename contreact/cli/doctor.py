"""`contreact doctor [CONFIG]`: what a run or a study needs, checked before it starts.

Ollama answers and has the model, the model calls tools, the run's own tools and hooks
load, the storage opens; given a batch config, every model on every host it may run on and,
with PostgreSQL, the study queue (`contreact.engine.doctor` holds the checks).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from contreact.cli.app import command, out, storage

if TYPE_CHECKING:
    from collections.abc import Iterable


@command(creates=True)
def doctor(
    config: Annotated[Path | None, typer.Argument(help="Check what this run config needs.")] = None,
    model: Annotated[str | None, typer.Option(help="The model to check.")] = None,
    host: Annotated[str | None, typer.Option(help="The Ollama host to check.")] = None,
) -> None:
    """Check that Ollama answers, has the model, and that the model can call tools.

    Given a batch config (one with `models`), every model is checked on every host.
    """
    from contreact.config import Settings, parse_config, validated
    from contreact.config.files import load_config
    from contreact.engine.doctor import Check, batch_checks, run_checks

    checks: Iterable[Check]
    if config and _is_batch(config):
        from contreact.studies.batch import load_batch

        spec = load_batch(config)
        runs = [parse_config(r.config, r.run_id) for r in spec.runs]
        checks = batch_checks(runs, spec.hosts, storage(spec.data_dir, spec.db_url))
    else:
        if config:
            settings: Settings = load_config(config, {"model": model, "host": host})
        else:
            chosen: dict[str, Any] = {"ollama": {"host": host}}
            if model:
                chosen["model"] = model
            settings = validated(Settings, chosen, "doctor")
        checks = run_checks(settings, storage(settings.storage.data_dir, settings.storage.url))
    failed = False
    for check in checks:
        mark = "[green]ok[/]  " if check.ok else "[red]FAIL[/]"
        out.print(f"{mark} {check.name:<10} ", end="")
        out.print(check.detail, markup=False)
        failed = failed or not check.ok
    if failed:
        raise typer.Exit(1)


def _is_batch(config: Path) -> bool:
    """Whether CONFIG is a batch config (it names `models`), as far as a quick read tells."""
    from contreact.config.yaml_file import YamlError, read_yaml

    try:
        data = read_yaml(config.read_text(encoding="utf-8"), str(config))
    except (OSError, YamlError):
        return False  # the run config's own loader says what is wrong
    return isinstance(data, dict) and "models" in data
