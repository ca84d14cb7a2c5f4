"""The operator's side of the channel: list waiting messages, answer one.

`contreact operator` lists the messages paused runs wait on; `contreact reply RUN TEXT`
answers one and lets that run continue.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated

import typer

from contreact.cli.app import command, finish, out, storage
from contreact.cli.hints import runnable
from contreact.cli.output import emit_json, emit_table


@command()
def operator(
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """List the agents' messages waiting for the operator, in all runs."""
    from contreact.engine.inbox import pending_operator_messages

    pending = pending_operator_messages(storage())
    if as_json:
        emit_json([asdict(p) for p in pending])
        return
    if not pending:
        out.print("No messages are waiting for the operator.")
        return
    emit_table(
        ["run", "cycle", "waiting since", "message"],
        [[p.run_id, p.cycle, p.since, p.message] for p in pending],
    )
    if out.is_terminal:
        out.print(runnable("Answer one with `contreact reply RUN TEXT`", storage()), markup=False)


@command()
def reply(
    run_id: Annotated[str, typer.Argument(help="The paused run.")],
    text: Annotated[str, typer.Argument(help="Your reply to the agent.")],
    quiet: Annotated[bool, typer.Option("--quiet", "-q")] = False,
) -> None:
    """Answer the message RUN is waiting on; the run continues (until done or the next message)."""
    from contreact.cli.progress import LineProgress
    from contreact.engine.runner import resume_run

    progress = LineProgress(quiet=quiet, storage=storage())
    outcome = resume_run(
        run_id, storage(), reply=text, progress=progress, ask_operator=progress.ask
    )
    finish(outcome)
