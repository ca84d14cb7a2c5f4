"""A small batch of stub runs, made in this process: models × replicates, as `batch` names them.

`contreact batch` drives each run in a child process; tests about what is done with a
batch's data (load, export, report) need only its runs, so they run them here, through
the same runner, under the same `<batch>.<model>.r<N>` ids and seeds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

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
    """Run `models` × `replicates` against `server` as batch `name`; returns the run ids."""
    from contreact.config import parse_config
    from contreact.runner import start_run

    run_ids = []
    for model in models:
        for replicate in range(1, replicates + 1):
            run_id = f"{name}.{model}.r{replicate}"
            config = parse_config(
                {
                    "run_id": run_id,
                    "model": model,
                    "cycles": cycles,
                    "batch": name,
                    "model_options": {"seed": 41 + replicate},
                    "ollama": {"host": server.url, "timeout_s": 20, "retries": 2},
                    "storage": backend.storage_yaml(),
                    **fields,
                },
                "test",
            )
            assert start_run(config, backend.storage()).status == "completed", run_id
            run_ids.append(run_id)
    return run_ids
