"""How a drive of a run ended, and what a face shows while it moves.

The runner never prints; a face (the CLI, the console, a run's own process) hands it a
`Progress` and reads a `RunOutcome` back. Kept apart so a face can name these without
importing the engine.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

from contreact.text.messages import cut

if TYPE_CHECKING:
    from contreact.checkpoints.registry import RunRecord, RunStatus
    from contreact.graph.state import AgentState


ExitCode = Literal[0, 1, 3]


EXIT_CODES: dict[RunStatus, ExitCode] = {"completed": 0, "failed": 1, "paused": 3, "running": 1}


@dataclass(frozen=True)
class RunOutcome:
    """How a drive of a run ended."""

    run_id: str
    status: RunStatus
    reason: str = ""
    cycle: int = 0

    @property
    def exit_code(self) -> ExitCode:
        """0 done, 3 paused waiting for the operator, 1 failed."""
        return EXIT_CODES[self.status]

    def failure_line(self) -> str | None:
        """The one line that says a failed run failed and how to continue it (else None)."""
        if self.status != "failed":
            return None
        run = cut(self.run_id)
        return (
            f"run {run} failed: {self.reason}; once that is fixed, "
            f"`contreact resume {run}` continues it"
        )


class Progress(Protocol):
    """What the face shows while a run moves; the runner calls it, never prints."""

    def started(self, record: RunRecord, state: AgentState | None, resumed: bool) -> None:
        """A drive begins (state is None for a fresh run)."""

    def node_started(self, node: str) -> None:
        """A node began."""

    def update(self, node: str, update: dict[str, Any]) -> None:
        """A node finished with this state update."""

    def operator(self, message: str, reply: str | None, policy: str) -> None:
        """The agent messaged the operator (reply None: left waiting in the queue)."""

    def finished(self, outcome: RunOutcome) -> None:
        """The drive ended."""


class SilentProgress:
    """A Progress that shows nothing (library use, tests)."""

    def started(self, record: RunRecord, state: AgentState | None, resumed: bool) -> None:
        """Show nothing."""

    def node_started(self, node: str) -> None:
        """Show nothing."""

    def update(self, node: str, update: dict[str, Any]) -> None:
        """Show nothing."""

    def operator(self, message: str, reply: str | None, policy: str) -> None:
        """Show nothing."""

    def finished(self, outcome: RunOutcome) -> None:
        """Show nothing."""
