"""A small wall-clock sampling profiler that also sees LangGraph's worker threads.

cProfile only watches the thread that enabled it, but LangGraph writes checkpoints from
a worker thread while the driving thread waits for the write to finish (with
``durability="sync"``). To answer "where does a step's wall time go", this sampler looks
at every thread's Python stack (``sys._current_frames()``) about once a millisecond:

* when the driving thread is doing something, the sample is charged to what it does;
* when it is blocked waiting for a future or a lock, the sample is charged to whatever a
  busy worker thread is doing at that moment (a checkpoint write, say), or to
  ``waiting`` if none is busy.

A stack is put in the highest-priority category any of its frames matches (see
:data:`RULES`), so a memory write inside the journal transaction counts as a tool, the
JSON encoder inside the checkpoint saver counts as serialization, and LangChain frames
inside the model call count as the model call. Shares are estimates: the sampler needs
the GIL, so set a short switch interval (done by :meth:`Sampler.start`) and read the
result as proportions, then scale them by a separately measured, unprofiled step time.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter
from collections.abc import Sequence
from types import FrameType

RULES: list[tuple[str, str, str | None]] = [
    ("checkpoint serialization (serde)", "langgraph/checkpoint/serde", None),
    ("checkpoint save/load (saver)", "langgraph/checkpoint/sqlite", None),
    ("checkpoint save/load (saver)", "langgraph/checkpoint/postgres", None),
    ("tool execution (memory store)", "/tools/", None),
    ("journal + event log (SQLAlchemy, JSONL)", "/checkpoints/journal.py", None),
    ("journal + event log (SQLAlchemy, JSONL)", "/checkpoints/event_store.py", None),
    ("journal + event log (SQLAlchemy, JSONL)", "/checkpoints/event_mirror.py", None),
    ("reflections query (cycles table)", "/checkpoints/cycles.py", None),
    ("similarity monitor", "/contreact/nodes/similarity", None),
    ("run registry / engine", "/checkpoints/registry.py", None),
    ("run registry / engine", "/checkpoints/schema.py", None),
    ("run registry / engine", "/checkpoints/storage.py", None),
    ("run registry / engine", "/checkpoints/sqlite_file.py", None),
    ("run registry / engine", "/checkpoints/engines.py", None),
    ("run registry / engine", "/checkpoints/transactions.py", None),
    ("run registry / engine", "/checkpoints/statements.py", None),
    ("bind_tools on every call", "langchain_ollama/chat_models.py", "bind_tools"),
    ("model call (ChatOllama + HTTP + stub)", "/nodes/invoke.py", "call_model"),
    ("model call (ChatOllama + HTTP + stub)", "langchain_ollama/", None),
    ("node logic (nodes/*)", "/nodes/", None),
    ("LangGraph/LangChain machinery", "langgraph/", None),
    ("LangGraph/LangChain machinery", "langchain_core/", None),
    ("runner / progress", "/contreact/engine/runner.py", None),
    ("runner / progress", "/contreact/cli/progress.py", None),
    ("benchmark harness", "/benchmarks/", None),
]
"""(category, path fragment, function name or None), highest priority first."""

_IDLE_FILES = ("threading.py", "queue.py", "selectors.py", "socketserver.py")


def _stack(frame: FrameType | None) -> list[tuple[str, str]]:
    out = []
    while frame is not None:
        out.append((frame.f_code.co_filename.replace("\\", "/"), frame.f_code.co_name))
        frame = frame.f_back
    return out


def _is_waiting(stack: Sequence[tuple[str, str]]) -> bool:
    """Whether the innermost Python frame is a blocking wait (lock, future, queue)."""
    if not stack:
        return True
    filename, func = stack[0]
    if filename.endswith(_IDLE_FILES):
        return True
    if filename.endswith("concurrent/futures/_base.py") and func in ("result", "wait"):
        return True
    return filename.endswith("concurrent/futures/thread.py") and func == "_worker"


def classify(stack: Sequence[tuple[str, str]]) -> str:
    """The category of the highest-priority rule any frame of ``stack`` matches."""
    best = len(RULES)
    for filename, func in stack:
        for i, (_, fragment, name) in enumerate(RULES[:best]):
            if fragment in filename and (name is None or name == func):
                best = i
                break
    return RULES[best][0] if best < len(RULES) else "other"


class Sampler:
    """Samples all threads' stacks from a daemon thread; see the module docstring."""

    def __init__(self, interval_s: float = 0.001) -> None:
        """Prepare (not start) the sampler.

        Args:
            interval_s: Time between samples.
        """
        self.interval_s = interval_s
        self.counts: Counter[str] = Counter()
        self.dropped = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._main = threading.main_thread().ident
        self._switch = sys.getswitchinterval()

    def start(self) -> Sampler:
        """Start sampling (and shorten the GIL switch interval so samples land evenly)."""
        self._switch = sys.getswitchinterval()
        sys.setswitchinterval(0.0002)
        self._thread = threading.Thread(target=self._run, name="bench-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> Counter[str]:
        """Stop sampling; returns samples per category."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        sys.setswitchinterval(self._switch)
        return self.counts

    def _run(self) -> None:
        me = threading.get_ident()
        while not self._stop.is_set():
            frames = sys._current_frames()
            try:
                self.counts[self._category(frames, me)] += 1
            except (AttributeError, TypeError):
                # A frame of another thread changed under us (CPython 3.11 exposes
                # frames being torn down); drop the sample.
                self.dropped += 1
            del frames
            time.sleep(self.interval_s)

    def _category(self, frames: dict[int, FrameType], me: int) -> str:
        main = _stack(frames.get(self._main)) if self._main in frames else []
        if main and not _is_waiting(main):
            return classify(main)
        busy = [
            s
            for tid, f in frames.items()
            if tid not in (me, self._main) and not _is_waiting(s := _stack(f))
        ]
        return classify(busy[0]) if busy else "waiting (nothing busy)"


def shares(counts: Counter[str]) -> list[tuple[str, float]]:
    """Categories with their share of all samples, largest first."""
    total = sum(counts.values()) or 1
    return [(name, n / total) for name, n in counts.most_common()]
