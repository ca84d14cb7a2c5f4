"""What a person sees while a run moves: one line per step, tool call and reflection.

On a terminal the lines are styled with rich; when stdout is not a TTY (CI, a log file,
a pipe) they are plain text, one event per line, so they stay greppable.
"""

from __future__ import annotations

from typing import Any, TextIO

from rich.console import Console
from rich.markup import escape

from checkpoints.registry import RunRecord
from contreact.runner import RunOutcome
from graph.state import AgentState


def _short(value: Any, limit: int = 60) -> str:
    text = str(value).replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 1] + "…"


class LineProgress:
    """Progress as lines: plain when not a TTY, styled on a terminal."""

    def __init__(self, stream: TextIO | None = None, *, quiet: bool = False) -> None:
        self.console = Console(file=stream, highlight=False, soft_wrap=True)
        self.quiet = quiet
        self.cycle = 0
        self.reflection = ""

    def _line(self, text: str, style: str = "") -> None:
        self.console.print(f"[{style}]{text}[/]" if style else text)

    def started(self, record: RunRecord, state: AgentState | None, resumed: bool) -> None:
        """Announce the run."""
        self.cycle = state.cycle if state else 1
        verb = "resuming" if resumed else "starting"
        where = f" at cycle {self.cycle}" if resumed else ""
        self._line(escape(f"{verb} run {record.run_id}{where} · model {record.model}"), "bold")

    def update(self, node: str, update: dict[str, Any]) -> None:
        """Show what a node did."""
        if node == "parse" and update.get("outcome") == "final":
            self.reflection = str(update.get("final_text", ""))
        if self.quiet and node != "reflect":
            return
        if node == "invoke":
            stats = update.get("stats") or {}
            seconds = float(stats.get("model_seconds") or 0)
            rate = stats.get("tokens_out", 0) / seconds if seconds > 0 else 0.0
            self._line(
                escape(
                    f"cycle {self.cycle} · step {stats.get('steps', '?')} · "
                    f"{stats.get('tokens_in', 0)} tokens in, {stats.get('tokens_out', 0)} out · "
                    f"{rate:.1f} tok/s"
                ),
                "dim",
            )
        elif node == "dispatch":
            for message in update.get("messages") or []:
                mark = "✗" if getattr(message, "status", "") == "error" else "→"
                self._line(escape(f"  {message.name} {mark} {_short(message.content)}"), "cyan")
        elif node == "reflect":
            text = self.reflection.strip() or "(empty reflection)"
            self._line(escape(f"cycle {self.cycle} reflection: {text}"), "green")
            self.cycle = int(update.get("cycle", self.cycle))
            self.reflection = ""

    def operator(self, message: str, reply: str | None, policy: str) -> None:
        """Show an operator exchange."""
        self._line(escape(f"  agent → operator: {_short(message, 200)}"), "magenta")
        if reply is None:
            self._line("  (waiting in the queue: answer with `contreact reply`)", "magenta")
        else:
            self._line(escape(f"  operator ({policy}) → agent: {_short(reply, 200)}"), "magenta")

    def finished(self, outcome: RunOutcome) -> None:
        """Say how the drive ended."""
        style = {"completed": "bold green", "paused": "bold yellow"}.get(outcome.status, "bold red")
        tail = f": {outcome.reason}" if outcome.reason else ""
        self._line(escape(f"run {outcome.run_id} {outcome.status}{tail}"), style)
