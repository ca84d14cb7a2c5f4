"""`contreact batch CONFIG`: models × replicates with bounded concurrency, one summary table."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from contreact.batch import BatchRunner, load_batch
from contreact.cli.app import OPTIONS, BadInputError, app, guarded, out, storage


@app.command()
def batch(
    config: Annotated[
        Path, typer.Argument(help="Batch config: a run config with `models`, `replicates`.")
    ],
    parallel: Annotated[
        int | None, typer.Option(help="Runs at once (default: the config's `parallel`).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
) -> None:
    """Run every model × replicate of CONFIG; run it again to resume the batch."""

    def body() -> None:
        spec = load_batch(config)
        if parallel is not None and parallel < 1:
            raise BadInputError("--parallel must be at least 1")
        where = storage()
        flags = ["--data-dir", str(where.data_dir)]
        if OPTIONS.db_url:
            flags += ["--db-url", OPTIONS.db_url]
        out.print(
            f"batch {spec.name}: {len(spec.runs)} runs, {parallel or spec.parallel} at a time",
            markup=False,
        )

        def notify(run_id: str, what: str) -> None:
            if not as_json:
                out.print(f"  {run_id}: {what}", markup=False)

        results = BatchRunner(spec, where, flags, notify).run(parallel or spec.parallel)
        if as_json:
            out.print_json(json.dumps([asdict(r) for r in results]))
        else:
            table = Table(
                "run",
                "model",
                "status",
                "cycles",
                "memory ops",
                "to operator",
                "final keys",
                "host",
            )
            for r in results:
                table.add_row(
                    r.run_id,
                    r.model,
                    r.status,
                    str(r.cycles),
                    str(r.memory_ops),
                    str(r.operator_messages),
                    str(r.final_memory_keys),
                    r.host,
                )
            out.print(table)
        statuses = {r.status for r in results}
        if statuses - {"completed", "paused"}:
            raise typer.Exit(1)
        if "paused" in statuses:
            raise typer.Exit(3)

    guarded(body)
