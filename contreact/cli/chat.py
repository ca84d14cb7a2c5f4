"""`contreact chat`: a tasked, interactive conversation on the same graph, tools and storage.

Each message you type opens one cycle whose first user turn is that message; the agent
works in it (memory tools included) and its final answer is printed. The run is an
ordinary tasked run: it is checkpointed, shows up in `contreact list`, and `--resume`
continues it in a new process with its memory and its conversation.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from contreact.cli.app import BadInputError, command, finish, out, storage
from contreact.cli.hints import runnable

if TYPE_CHECKING:
    from contreact.cli.progress import LineProgress
    from contreact.engine.outcome import RunOutcome

EXIT_WORDS = frozenset({"exit", "quit", ":q", "/exit", "/quit"})


def chat_progress(quiet: bool) -> LineProgress:
    """A progress that shows tool calls briefly and the agent's answer as a chat line."""
    from contreact.cli.progress import LineProgress

    class ChatProgress(LineProgress):
        def started(self, record: Any, state: Any, resumed: bool) -> None:
            """Say nothing: the chat prompt is announcement enough."""

        def node_started(self, node: str) -> None:
            """No status line in a chat."""

        def update(self, node: str, update: dict[str, Any]) -> None:
            """Tool calls dimmed, the cycle's answer on a line of its own."""
            if node == "parse" and update.get("outcome") == "final":
                self.reflection = str(update.get("final_text", ""))
            elif node == "dispatch" and not self.quiet:
                for message in update.get("messages") or []:
                    self._line(f"  · {message.name}", "dim")
            elif node == "reflect":
                self._line(escape(self.reflection.strip()) or "(no answer)", "")
                self.reflection = ""

        def finished(self, outcome: RunOutcome) -> None:
            """Only failures and pauses are news in a chat."""
            if outcome.status in ("failed", "paused"):
                super().finished(outcome)

    return ChatProgress(quiet=quiet)


def _read(prompt: str) -> str | None:
    """One line from the user; None when they want to leave (EOF, Ctrl-C, exit)."""
    try:
        line = out.input(prompt)
    except (EOFError, KeyboardInterrupt):
        return None
    return None if line.strip().lower() in EXIT_WORDS else line


@command(creates=True)
def chat(
    model: Annotated[str | None, typer.Option(help="Ollama model.")] = None,
    host: Annotated[str | None, typer.Option(help="Ollama host.")] = None,
    config: Annotated[
        Path | None, typer.Option(help="Take settings from this run config (its task is ignored).")
    ] = None,
    run_id: Annotated[str | None, typer.Option("--run-id", help="Name of the new chat.")] = None,
    resume: Annotated[str | None, typer.Option("--resume", help="Continue this chat.")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Hide tool calls.")] = False,
) -> None:
    """Chat with a tasked agent; `exit`, Ctrl-D or Ctrl-C leave, `--resume` continues later."""
    from contreact.checkpoints.engines import engine_for
    from contreact.checkpoints.registry import get_run
    from contreact.engine.runner import resume_run, start_run

    where = storage()
    progress = chat_progress(quiet)
    # Named up front: the id is printed now and on leaving, for `--resume`.
    name = resume or run_id or "chat-" + datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    started = resume is not None
    if resume is not None:
        record = get_run(engine_for(where), resume)
        if not record.config.get("task"):
            raise BadInputError(f"run {resume} is not a chat (it has no task)")
        if record.status != "completed":
            # A turn was interrupted: finish it before asking for the next one.
            resume_run(resume, where, progress=progress, ask_operator=progress.ask)
        out.print(f"Continuing chat {name}. Type `exit` to leave.", markup=False)
    else:
        out.print(f"New chat {name}. Type `exit` to leave.", markup=False)
    while True:
        line = _read("you> ")
        if line is None:
            if started:
                said = f"bye: continue with `contreact chat --resume {name}`"
                out.print(runnable(said, where), markup=False)
            else:
                out.print(f"bye: nothing was said, so chat {name} was not kept", markup=False)
            return
        if not line.strip():
            continue
        try:
            if not started:
                settings = _settings(config, name, line, model, host)
                outcome = start_run(settings, where, progress=progress, ask_operator=progress.ask)
                started = True
            else:
                outcome = resume_run(
                    name,
                    where,
                    extra_cycles=1,
                    opening=line,
                    overrides={"model": model, "host": host},
                    progress=progress,
                    ask_operator=progress.ask,
                )
        except KeyboardInterrupt:
            said = f"\nInterrupted. Continue with `contreact chat --resume {name}`"
            out.print(runnable(said, where), markup=False)
            raise typer.Exit(130) from None
        if outcome.status == "failed":
            finish(outcome)


def _settings(
    config: Path | None, name: str, task: str, model: str | None, host: str | None
) -> Any:
    """The chat's run config: one cycle per turn, the first message as its task."""
    from contreact.config import parse_config
    from contreact.config.files import deep_merge, load_config

    base: dict[str, Any] = {"model": "llama3.1:8b"}
    if config is not None:
        base = load_config(config, {"run_id": name}).model_dump(mode="json")
    changes: dict[str, Any] = {
        "run_id": name,
        "cycles": 1,
        "task": task,
        "operator": {"mode": "terminal"},
        "similarity": {"enabled": False},
    }
    if model:
        changes["model"] = model
    if host:
        changes["ollama"] = {"host": host}
    return parse_config(deep_merge(base, changes), "chat")
