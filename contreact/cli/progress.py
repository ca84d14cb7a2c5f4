"""What a person sees while a run moves: a line per step, tool call and reflection.

On a terminal a live status line (spinner, cycle, step, what is running now, tokens/s)
sits under the lines and the lines are styled; when stdout is not a TTY (CI, a log
file, a pipe) there is no status line and the lines are plain text, one event per line,
so they stay greppable. `quiet` keeps only reflections and the outcome.

The terminal operator policy asks through `ask`: the live line stops while the agent's
message and the prompt are on screen (the typed reply echoes as typed), and comes back
with the next step. A failed run's reason is not printed here: the face prints it once,
on stderr.
"""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING, Any, TextIO

from rich.console import Console
from rich.markup import escape
from rich.status import Status

from contreact.cli.hints import runnable
from contreact.ollama.server_numbers import number_or_zero
from contreact.text.terminal import visible

if TYPE_CHECKING:
    from contreact.checkpoints.registry import RunRecord
    from contreact.checkpoints.storage import Storage
    from contreact.engine.outcome import RunOutcome
    from contreact.graph.state import AgentState
    from contreact.studies.status import EventTail, RunNote

NOTING = frozenset({"assemble", "dispatch"})
"""The nodes whose steps may hold an intervention or a hook's veto or rewrite."""

DOING = {
    "assemble": "assembling the prompt",
    "invoke": "waiting for the model",
    "parse": "reading the answer",
    "dispatch": "running tools",
    "reflect": "closing the cycle",
}


def _short(value: Any, limit: int = 60) -> str:
    text = str(value).replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _args(value: Any) -> str:
    return _short(json.dumps(value, ensure_ascii=False, default=str), 80)


def note_line(note: RunNote) -> str:
    """An intervention, a hook's veto or rewrite, a contained tool: one line of live output."""
    p = note.payload
    # Events count a cycle's steps from 0; the progress lines, like people, from 1.
    step = f" · step {int(p['step']) + 1}" if isinstance(p.get("step"), int) else ""
    where = f"cycle {note.cycle}{step}"
    if note.event_type == "ERROR":
        return (
            f"{where} · tool `{p.get('tool_name', '?')}` {_short(p.get('message', ''), 120)}; "
            "the model was told and the run goes on"
        )
    if note.event_type == "HOOK":
        hook, tool = p.get("hook", "?"), p.get("tool_name", "?")
        if p.get("action") == "rewrite":
            return (
                f"{where} · hook {hook} rewrote {tool}'s arguments: "
                f"{_args(p.get('parameters'))} → {_args(p.get('rewritten'))}"
            )
        return f"{where} · hook {hook} vetoed {tool}: {_short(p.get('reason', ''), 120)}"
    detail = p.get("detail") or {}
    kind = p.get("kind", "")
    if kind == "operator_message":
        said = f"operator message: {_short(detail.get('message', ''), 120)}"
    elif kind == "memory":
        said = f"memory wiped ({detail.get('deleted', 0)} keys deleted)"
    elif kind == "tool_fails":
        said = f"{p.get('tool_name', '?')} made to fail: {_short(detail.get('error', ''), 120)}"
    else:
        said = f"{kind}: {_args(detail)}"
    return f"{where} · intervention {p.get('index', 0) + 1}: {said}"


class _UnobservedConsole(Console):
    """A console whose reader may go away (`contreact run CONFIG | head`).

    rich ends the process (status 1) when a pipe closes; a run should rather go on
    unobserved, its later lines discarded, than fail over its progress lines.
    """

    def on_broken_pipe(self) -> None:
        """Send the rest of stdout to /dev/null and carry on."""
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


class LineProgress:
    """Progress as lines, with a live status line when on a terminal."""

    def __init__(
        self, stream: TextIO | None = None, *, quiet: bool = False, storage: Storage | None = None
    ) -> None:
        """Progress on `stream` (stdout).

        `storage`: where the run's events are read from, to show its interventions and
        the hooks' vetoes and rewrites as they happen.
        """
        self.console = _UnobservedConsole(file=stream, highlight=False, soft_wrap=True)
        self.quiet = quiet
        self.storage = storage
        self.tail: EventTail | None = None
        self.run_id = ""
        self.cycle = 0
        self.last_cycle = 0
        self.step = 0
        self.rate = 0.0
        self.reflection = ""
        self.tokens_out: int | float = 0
        self.seconds: int | float = 0.0
        self.status: Status | None = None
        self.asked = False
        """The last operator message was asked here (the exchange is on screen already)."""
        self.announced = ""
        """The run already announced by `announce` (its `started` line is not repeated)."""

    def _line(self, text: str, style: str = "") -> None:
        # Model and tool text never reaches the terminal raw, whatever the caller passed.
        text = visible(text)
        self.console.print(f"[{style}]{text}[/]" if style else text)

    def _show(self, doing: str) -> None:
        if not self.console.is_terminal:
            return
        text = escape(
            f"cycle {self.cycle}/{self.last_cycle} · step {self.step + 1} · {doing}"
            + (f" · {self.rate:.1f} tok/s" if self.rate else "")
        )
        if self.status is None:
            self.status = self.console.status(text, spinner="dots")
            self.status.start()
        else:
            self.status.update(text)

    def pause(self) -> None:
        """Stop the live line (it comes back with the next step)."""
        if self.status is not None:
            self.status.stop()
            self.status = None

    def ask(self, message: str) -> str:
        """The terminal operator policy: show the agent's message, read a non-empty reply.

        Raises:
            OperatorUnavailableError: stdin is not a console (the run then waits in the queue).
        """
        from contreact.errors import OperatorUnavailableError

        if not sys.stdin.isatty():
            raise OperatorUnavailableError("operator mode 'terminal' found no interactive console")
        self.pause()
        self._line(escape(f"\nMessage from the agent: {message}"), "bold magenta")
        reply = ""
        while not reply.strip():
            reply = self.console.input("Your reply: ")
        self.asked = True
        return reply

    def announce(self, run_id: str, model: str) -> None:
        """Say a new run is starting, before the engine is loaded (a second or so)."""
        self._line(escape(f"starting run {run_id} · model {model}"), "bold")
        self.announced = run_id

    def started(self, record: RunRecord, state: AgentState | None, resumed: bool) -> None:
        """Announce the run (unless `announce` did)."""
        self.cycle = state.cycle if state else (record.fork_cycle or 0) + 1
        self.last_cycle = state.last_cycle if state else int(record.config.get("cycles", 0))
        self.run_id = record.run_id
        if self.storage is not None and not self.quiet:
            from contreact.checkpoints.engines import engine_for
            from contreact.studies.status import EventTail

            self.tail = EventTail(engine_for(self.storage), record.run_id)
        if self.announced == record.run_id and not resumed:
            return
        verb = "resuming" if resumed else "starting"
        where = f" at cycle {self.cycle}" if resumed else ""
        self._line(escape(f"{verb} run {record.run_id}{where} · model {record.model}"), "bold")

    def node_started(self, node: str) -> None:
        """A node began: say what the run is doing now."""
        self._show(DOING.get(node, node))

    def update(self, node: str, update: dict[str, Any]) -> None:
        """Show what a node did."""
        if self.tail is not None and node in NOTING:
            for note in self.tail.read():
                self._line(escape(f"  {note_line(note)}"), "yellow")
        stats = update.get("stats") or {}
        if node == "parse" and update.get("outcome") == "final":
            self.reflection = str(update.get("final_text", ""))
        if node == "invoke" and stats:
            self._invoked(stats)
        elif node == "dispatch" and not self.quiet:
            for message in update.get("messages") or []:
                mark = "✗" if getattr(message, "status", "") == "error" else "→"
                self._line(escape(f"  {message.name} {mark} {_short(message.content)}"), "cyan")
        elif node == "reflect":
            text = self.reflection.strip() or "(empty reflection)"
            self._line(escape(f"cycle {self.cycle} reflection: {text}"), "green")
            self.cycle = int(update.get("cycle", self.cycle))
            self.reflection = ""
            self.step = self.tokens_out = 0
            self.seconds = 0.0

    def _invoked(self, stats: dict[str, Any]) -> None:
        # Counters are per cycle and cumulative; the line shows this step's share. They
        # sum server numbers, read through the one check (a huge one cannot overflow).
        tokens_out = number_or_zero(stats.get("tokens_out"))
        model_seconds = number_or_zero(stats.get("model_seconds"))
        out = max(0, tokens_out - self.tokens_out)
        seconds = model_seconds - self.seconds
        self.tokens_out, self.seconds = tokens_out, model_seconds
        self.step = int(stats.get("steps", self.step + 1))
        self.rate = out / seconds if seconds > 0 else 0.0
        if not self.quiet:
            self._line(
                escape(
                    f"cycle {self.cycle} · step {self.step} · {out:.0f} tokens out"
                    f" in {seconds:.2f} s · {self.rate:.1f} tok/s"
                ),
                "dim",
            )

    def operator(self, message: str, reply: str | None, policy: str) -> None:
        """Show an operator exchange (after `ask`, only the reply is news)."""
        if self.asked and reply is not None:
            self.asked = False
            self._line(escape(f"  operator ({policy}) → agent: {_short(reply, 200)}"), "magenta")
            return
        self._line(escape(f"  agent → operator: {_short(message, 200)}"), "magenta")
        if reply is None:
            hint = f"`contreact reply {self.run_id or 'RUN'} TEXT`"
            said = runnable(f"  (waiting in the queue: answer with {hint})", self.storage)
            self._line(escape(said), "magenta")
        else:
            self._line(escape(f"  operator ({policy}) → agent: {_short(reply, 200)}"), "magenta")

    def finished(self, outcome: RunOutcome) -> None:
        """Say how the drive ended (a failure is the face's to report, on stderr)."""
        self.pause()
        if outcome.status == "failed":
            return
        style = {"completed": "bold green", "paused": "bold yellow"}.get(outcome.status, "bold red")
        tail = f": {runnable(outcome.reason, self.storage)}" if outcome.reason else ""
        self._line(escape(f"run {outcome.run_id} {outcome.status}{tail}"), style)
