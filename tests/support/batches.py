"""A batch of stub runs, planned as `contreact batch` plans it, each run driven in this process.

`contreact batch` drives each run in a child process; tests about what is done with a
batch's data (load, export, report, the notebook) need only its runs. They are planned by
the batch's own code (`load_batch`: ids `<batch>.<model>.r<N>`, replicate seeds), then run
here through the same runner, which spares a Python start per run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import yaml

from contreact.stub import StubServer
from support.backends import Backend


def run_batch(
    backend: Backend,
    server: StubServer,
    name: str,
    models: Sequence[str],
    *,
    replicates: int = 2,
    cycles: int = 3,
    **fields: Any,
) -> list[str]:
    """Run `models` × `replicates` against `server` as batch `name`; returns the run ids.

    `fields` are more keys of the batch config (`model_options`, `similarity`, ...).
    """
    from contreact.config import parse_config
    from contreact.engine.runner import start_run
    from contreact.studies.batch import load_batch

    spec: dict[str, Any] = {
        "batch": name,
        "models": list(models),
        "replicates": replicates,
        "cycles": cycles,
        "ollama": {"host": server.url, "timeout_s": 20, "retries": 2},
        "storage": backend.storage_yaml(),
        **fields,
    }
    path = backend.data_dir.parent / f"{name}.batch.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    run_ids = []
    for planned in load_batch(path).runs:
        config = parse_config(planned.config, planned.run_id)
        assert start_run(config, backend.storage()).status == "completed", planned.run_id
        run_ids.append(planned.run_id)
    return run_ids
