"""`contreact delete RUN [--yes]`: remove a run and everything it left, refusing a live run."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from contreact.cli.app import BadInputError, command, out, storage


@command()
def delete(
    run_id: Annotated[str, typer.Argument(help="The run to delete.")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Delete RUN: registry, checkpoints, memory, journal, events, cycles and log files."""
    from contreact.checkpoints.deletion import RunIsLiveError, delete_run
    from contreact.checkpoints.engines import engine_for
    from contreact.checkpoints.registry import get_run

    where = storage()
    record = get_run(engine_for(where), run_id)
    if not yes:
        if not sys.stdin.isatty():
            raise BadInputError(f"deleting run {run_id} cannot be undone: confirm with --yes")
        if not typer.confirm(
            f"Delete run {run_id} ({record.shown_status}, model {record.model}) "
            "and all its data? This cannot be undone"
        ):
            out.print("Nothing deleted.")
            raise typer.Exit(1)
    try:
        deleted = delete_run(where, run_id)
    except RunIsLiveError:
        raise BadInputError(
            f"run {run_id} is running (process {record.pid} on {record.driver_host}); "
            "stop it first (Ctrl-C or kill), then delete it"
        ) from None
    if not where.is_sqlite:
        from contreact.studies.queue import unqueue

        unqueue(where, run_id)  # a queued job would start the deleted run again
    rows = sum(deleted.rows.values())
    out.print(
        f"Deleted run {run_id}: its checkpoints, {rows} rows and {len(deleted.files)} files.",
        markup=False,
    )
