"""How a run is checkpointed, resumed after a crash and branched.

The runner reaches it through the front door (`checkpoints.persistence`), and so do the
nodes (their step's check, `enter_step`, through the SQL persistence). What it promises:

* **Checkpoint policy.** `step` saves a LangGraph checkpoint after every step (Studio time
  travel to any step of a CLI run). `cycle` (the default) saves one per cycle: each
  invocation runs one cycle and pauses after the node that closes it, and the checkpoint
  is written when the invocation exits. An invocation whose input exists nowhere else (an
  operator's reply, the cycle that extends a finished run) is saved step by step under
  either policy; a new run's or a fork's first input is rebuilt from the registry.
* **Crash-resume.** Invoking a thread with no input continues from its last saved
  checkpoint. The steps after it run again, and every side effect they made before the
  crash is replayed from the journal (`journal.Ledger.once`) instead of happening twice:
  under `cycle` a kill -9 loses only the unsaved steps' checkpoints, never an effect.
* **Branches.** A step that starts from a fork point (a state edit, time travel, a copied
  thread) runs in a new lineage with its own journal, events and memory, inherited from
  its parent up to that point (`lineage`); a re-run from the same checkpoint replays.
* **One owner per run.** A thread that carries another thread's run id is refused; a run
  begun outside the CLI (Studio) is registered at its first step.

`open_run` gives a drive its saver; `Checkpointed` runs a thread's invocations under a
policy and says where each one stopped; `enter_step` is what every node step calls first.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.types import Command
from sqlalchemy import Engine

from contreact.checkpoints.engines import engine_for
from contreact.checkpoints.event_mirror import sync_log
from contreact.checkpoints.fork import ForkPoint
from contreact.checkpoints.lineage import Checkpoint, lineage_at
from contreact.checkpoints.registry import (
    RunExistsError,
    create_run,
    find_run_thread,
    set_status,
)
from contreact.checkpoints.saver import open_saver
from contreact.checkpoints.storage import Storage
from contreact.checkpoints.transactions import held_connection

Policy = Literal["step", "cycle"]


@contextmanager
def open_run(storage: Storage, run_id: str) -> Iterator[BaseCheckpointSaver[Any]]:
    """The saver to compile a run's graph with, for one drive of the run.

    Catches the run's JSONL log up with the database first (a crash between an event's
    commit and its append leaves the file short), and holds one connection on this thread
    for the nodes' journal transactions while the drive lasts.
    """
    engine = engine_for(storage)
    sync_log(engine, storage, run_id)
    with open_saver(storage) as saver, held_connection(engine):
        yield saver


@dataclass(frozen=True)
class Latest:
    """A thread's newest saved checkpoint, as a drive starts."""

    values: dict[str, Any]
    """The state's fields (empty: nothing saved yet)."""
    next: tuple[str, ...]
    """The nodes that run next (empty: the graph ended)."""
    checkpoint_id: str | None = None
    """The saved checkpoint's id (None: nothing saved yet)."""


@dataclass(frozen=True)
class Stop:
    """Where an invocation left the thread."""

    kind: Literal["cycle", "ended", "interrupted", "stuck"]
    """`cycle`: a cycle closed and the run goes on (invoke again with no input); `ended`:
    the graph reached its end; `interrupted`: paused on `interrupts`; `stuck`: stopped
    before `next` for no reason the policy knows (a bug)."""
    interrupts: tuple[Any, ...] = ()
    next: tuple[str, ...] = ()


class Checkpointed:
    """A run's thread, driven one invocation at a time under its checkpoint policy."""

    def __init__(self, graph: Any, thread_id: str, policy: Policy, *, cycle_node: str) -> None:
        """Drive `thread_id` of the compiled `graph`; `cycle_node` closes a cycle."""
        self.graph = graph
        self.thread: RunnableConfig = {"configurable": {"thread_id": thread_id}}
        self.policy = policy
        self.cycle_node = cycle_node
        self._saved = False
        self._closed = False

    def latest(self) -> Latest:
        """The thread's newest saved checkpoint."""
        snapshot = self.graph.get_state(self.thread)
        self._saved = bool(snapshot.values)
        saved = (snapshot.config or {}).get("configurable", {}).get("checkpoint_id")
        return Latest(dict(snapshot.values), tuple(snapshot.next), saved)

    def interrupts(self) -> tuple[Any, ...]:
        """The values the thread is paused on (an operator's question), newest checkpoint."""
        return tuple(i.value for i in self.graph.get_state(self.thread).interrupts)

    def stream(
        self, payload: Any, *, context: Any, config: RunnableConfig
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """Run one invocation from `payload`; yields each node's name and state update.

        `payload` is None to continue the thread (crash-resume included), a state to open
        a cycle, or a `Command` answering an interrupt.
        """
        per_cycle = self.policy == "cycle"
        # Inputs that exist nowhere but in this invocation must be saved at once: an
        # operator's reply (a pending write of the paused checkpoint) and the cycle that
        # extends a saved thread (lost, a resume would find the run finished).
        saves_steps = (
            not per_cycle
            or isinstance(payload, Command)
            or (isinstance(payload, dict) and self._saved)
        )
        self._closed = False
        for chunk in self.graph.stream(
            payload,
            {**self.thread, **config},
            context=context,
            durability="sync" if saves_steps else "exit",
            interrupt_after=[self.cycle_node] if per_cycle else None,
            stream_mode="updates",
        ):
            for node, update in cast(dict[str, Any], chunk).items():
                if node == "__interrupt__":
                    # A bare pause after the cycle's last node, not a question.
                    self._closed = self._closed and not update
                elif isinstance(update, dict):
                    self._closed = node == self.cycle_node
                    yield node, update
        self._saved = True

    def stop(self) -> Stop:
        """Where the last invocation left the thread."""
        if self.policy == "cycle" and self._closed:
            # The common case needs no look at the saved state (a checkpoint load).
            return Stop("cycle")
        snapshot = self.graph.get_state(self.thread)
        if snapshot.interrupts:
            return Stop("interrupted", tuple(i.value for i in snapshot.interrupts))
        if not snapshot.next:
            return Stop("ended")
        if self.policy == "cycle":
            return Stop("cycle")  # a pause between cycles, saved: on to the next
        return Stop("stuck", next=tuple(snapshot.next))


class ForeignThreadError(RuntimeError):
    """A thread carries the run id of a run registered to another thread (a Studio copy)."""


@lru_cache(maxsize=1024)
def _owner(engine: Engine, run_id: str) -> str | None:
    # A run's thread never changes once registered, so one look-up per process is enough.
    return find_run_thread(engine, run_id)


def _adopt(
    engine: Engine, run_id: str, thread_id: str, register: Callable[[], dict[str, Any]]
) -> str:
    """Register a run begun elsewhere than the CLI (Studio) to `thread_id`; its owner."""
    config = register()
    try:
        create_run(
            engine,
            run_id,
            model=str(config["model"]),
            host=str(config["ollama"]["host"]),
            config=config,
            thread_id=thread_id,
            origin="studio",
        )
        # No CLI process drives it: `resume` and `reply` may take it over at any time.
        set_status(engine, run_id, "running", pid=None)
    except RunExistsError:
        pass  # registered meanwhile (another thread won the race: refused by the caller)
    _owner.cache_clear()
    owner = _owner(engine, run_id)
    assert owner is not None
    return owner


_entered: OrderedDict[tuple[str, str], None] = OrderedDict()
"""(thread, invocation) whose first step was checked. The later steps of one invocation
run from checkpoints its own loop just wrote, which are never fork points and carry the
same run id, so one check per `invoke`/`stream` call is enough."""


def _first_step(thread_id: str, invocation: str | None) -> bool:
    if not invocation:
        return True  # no run id to recognise the invocation by: check every step
    key = (thread_id, invocation)
    if key in _entered:
        return False
    _entered[key] = None
    if len(_entered) > 4096:
        _entered.popitem(last=False)
    return True


def enter_step(
    storage: Storage,
    *,
    run_id: str,
    lineage: str,
    thread_id: str | None,
    checkpoint_id: str,
    invocation: str | None,
    fork_point: Callable[[], ForkPoint],
    model: str,
    register: Callable[[], dict[str, Any]],
) -> str:
    """What every node step does first: the lineage it runs in.

    On an invocation's first step: a run not registered yet (begun in Studio) is
    registered to this thread with the config `register` gives; a thread that carries
    another thread's run id is refused; and a step that starts from a fork point gets a
    new lineage. Without a checkpointer (`thread_id` None) there is nothing to check.

    Raises:
        ForeignThreadError: the run id belongs to another thread (a thread copied in
            Studio, or a second Studio thread given the same run id), which must not
            write into that run's memory and log; `contreact fork` makes a proper branch.
    """
    if thread_id is None or not _first_step(thread_id, invocation):
        return lineage
    engine = engine_for(storage)
    owner = _owner(engine, run_id) or _adopt(engine, run_id, thread_id, register)
    if owner != thread_id:
        raise ForeignThreadError(
            f"run {run_id} belongs to thread {owner}, not to this thread {thread_id}; "
            f"branch it with `contreact fork {run_id} --cycle K --as NEW` instead"
        )
    cp = Checkpoint(thread_id, checkpoint_id)
    return lineage_at(
        storage, engine, cp, run_id=run_id, lineage=lineage, fork_point=fork_point, model=model
    )
