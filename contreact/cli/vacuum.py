"""`contreact vacuum`: compact the database, refusing while a run is live."""

from __future__ import annotations

from typing import Annotated

import typer

from contreact.cli.app import BadInputError, command, out, storage
from contreact.cli.output import emit_json


def megabytes(size: int) -> str:
    """Bytes as megabytes (10^6) with one decimal, the way `benchmarks.md` counts them."""
    return f"{size / 1e6:.1f} MB"


@command()
def vacuum(
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Compact the database (SQLite VACUUM, PostgreSQL VACUUM (ANALYZE)); no run may be live."""
    from contreact.checkpoints.compaction import LiveRunsError
    from contreact.checkpoints.compaction import vacuum as compact

    try:
        done = compact(storage())
    except LiveRunsError as exc:
        first = exc.live[0]
        raise BadInputError(
            f"run {first.run_id} is running (process {first.pid} on {first.driver_host})"
            + (f" and {len(exc.live) - 1} more" if len(exc.live) > 1 else "")
            + "; vacuum when no run is live"
        ) from None
    if as_json:
        emit_json({"database": done.where, "bytes_before": done.before, "bytes_after": done.after})
        return
    out.print(
        f"Vacuumed {done.where}: {megabytes(done.before)} -> {megabytes(done.after)} "
        f"({megabytes(done.before - done.after)} freed).",
        markup=False,
    )
