"""The operator's side of the channel: list waiting messages, answer one.

`contreact operator` lists the messages paused runs wait on; `contreact reply RUN TEXT`
answers one and lets that run continue.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Annotated, NoReturn

import typer
from rich.table import Table

from contreact.cli.app import app, ask_on_terminal, finish, guarded, out, storage
from contreact.progress import LineProgress


@app.command()
def operator(
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """List the agents' messages waiting for the operator, in all runs."""

    def body() -> None:
        from contreact.runner import pending_operator_messages

        pending = pending_operator_messages(storage())
        if as_json:
            out.print_json(json.dumps([asdict(p) for p in pending]))
            return
        if not pending:
            out.print("No messages are waiting for the operator.")
            return
        table = Table("run", "cycle", "waiting since", "message")
        for p in pending:
            table.add_row(p.run_id, str(p.cycle), p.since, p.message)
        out.print(table)
        out.print("Answer one with: contreact reply RUN TEXT", markup=False)

    guarded(body)


@app.command()
def reply(
    run_id: Annotated[str, typer.Argument(help="The paused run.")],
    text: Annotated[str, typer.Argument(help="Your reply to the agent.")],
    quiet: Annotated[bool, typer.Option("--quiet", "-q")] = False,
) -> None:
    """Answer the message RUN is waiting on; the run continues (until done or the next message)."""

    def body() -> NoReturn:
        from contreact.runner import resume_run

        outcome = resume_run(
            run_id,
            storage(),
            reply=text,
            progress=LineProgress(quiet=quiet),
            ask_operator=ask_on_terminal,
        )
        finish(outcome)

    guarded(body)
