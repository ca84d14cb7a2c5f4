"""Exact inclusive timings of named engine functions, by wrapping them for one run.

A diagnostic for ``overhead.py --profile`` and ``resume_latency.py --profile``: each
function in :data:`TARGETS` (or :data:`RESUME_TARGETS`) is replaced
(for the duration of a ``with Timers():`` block, in this process only; the engine's
files are not touched) by a wrapper that adds the call's wall time to a counter. The
wrappers cost about a microsecond per call, so unlike cProfile they do not distort
Python-heavy code. Times are inclusive: a memory tool runs inside the journal
transaction, so its time is part of ``Ledger.commit`` too; the table shows such rows
indented under their parent. Checkpoint writes run on LangGraph's worker thread while
the driving thread waits for them (``durability="sync"``), so their wall time is part
of the step's wall time.
"""

from __future__ import annotations

import functools
import importlib
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from typing import Any

TARGETS: list[tuple[str, str, str, str]] = [
    # (label, module, attribute path, parent label or "")
    (
        "fork test before every node (nodes.step.lineage_of)",
        "contreact.nodes.step",
        "lineage_of",
        "",
    ),
    ("journal look-up (Ledger.recall)", "contreact.checkpoints.journal", "Ledger.recall", ""),
    ("journal transaction (Ledger.commit)", "contreact.checkpoints.journal", "Ledger.commit", ""),
    # The model call runs inside the journal transaction (it is the transaction's `act`).
    (
        "model call (nodes.invoke.call_model)",
        "contreact.nodes.invoke",
        "call_model",
        "journal transaction (Ledger.commit)",
    ),
    (
        "journal row and event rows (write_record)",
        "contreact.checkpoints.journal",
        "write_record",
        "journal transaction (Ledger.commit)",
    ),
    (
        "memory tool (run_tool)",
        "contreact.nodes.dispatch",
        "run_tool",
        "journal transaction (Ledger.commit)",
    ),
    (
        "JSONL append (mirror_lines)",
        "contreact.checkpoints.journal",
        "mirror_lines",
        "journal transaction (Ledger.commit)",
    ),
    ("events without a result (Ledger.emit)", "contreact.checkpoints.journal", "Ledger.emit", ""),
    ("similarity monitor (assess)", "contreact.nodes.reflect", "assess", ""),
    ("memory key count (count_keys)", "contreact.checkpoints.memories", "count_keys", ""),
    ("prompt build (build_prompt)", "contreact.nodes.invoke", "build_prompt", ""),
    ("context budget (plan_trim)", "contreact.nodes.assemble", "plan_trim", ""),
    (
        "checkpoint write (SqliteSaver.put)",
        "langgraph.checkpoint.sqlite",
        "SqliteSaver.put",
        "",
    ),
    (
        "checkpoint writes (SqliteSaver.put_writes)",
        "langgraph.checkpoint.sqlite",
        "SqliteSaver.put_writes",
        "",
    ),
    (
        "checkpoint write (PostgresSaver.put)",
        "langgraph.checkpoint.postgres",
        "PostgresSaver.put",
        "",
    ),
    (
        "checkpoint writes (PostgresSaver.put_writes)",
        "langgraph.checkpoint.postgres",
        "PostgresSaver.put_writes",
        "",
    ),
]
"""What to time in a step. Missing modules or attributes are skipped (the engine evolves)."""

RESUME_TARGETS: list[tuple[str, str, str, str]] = [
    ("database engine (engine_for)", "contreact.engine.runner", "engine_for", ""),
    ("registry read (get_run)", "contreact.engine.runner", "get_run", ""),
    ("stored config (config_of)", "contreact.engine.runner", "config_of", ""),
    ("JSONL log synced with the database (sync_log)", "contreact.engine.runner", "sync_log", ""),
    (
        "SQLite connection for the saver (connect_sqlite)",
        "contreact.checkpoints.saver",
        "connect_sqlite",
        "",
    ),
    ("saver tables (SqliteSaver.setup)", "langgraph.checkpoint.sqlite", "SqliteSaver.setup", ""),
    (
        "PostgreSQL saver migrations check (PostgresSaver.setup)",
        "langgraph.checkpoint.postgres",
        "PostgresSaver.setup",
        "",
    ),
    (
        "schema version check, or upgrade (bring_up_to_date)",
        "contreact.checkpoints.engines",
        "bring_up_to_date",
        "database engine (engine_for)",
    ),
    ("fork test (nodes.step.lineage_of)", "contreact.nodes.step", "lineage_of", ""),
    ("graph compilation (StateGraph.compile)", "langgraph.graph.state", "StateGraph.compile", ""),
    ("checkpoint load (Pregel.get_state)", "langgraph.pregel.main", "Pregel.get_state", ""),
    ("registry update (set_status)", "contreact.engine.runner", "set_status", ""),
    ("earlier reflections (reflections)", "contreact.nodes.invoke", "reflections", ""),
    ("prompt build (build_prompt)", "contreact.nodes.invoke", "build_prompt", ""),
    ("ChatOllama client creation (chat_client)", "contreact.nodes.invoke", "chat_client", ""),
    ("journal look-up (Ledger.recall)", "contreact.checkpoints.journal", "Ledger.recall", ""),
]
"""What to time in a resume, up to its first model request."""


class Timers:
    """Context manager that wraps :data:`TARGETS` and accumulates their wall time."""

    def __init__(self, targets: list[tuple[str, str, str, str]] | None = None) -> None:
        self.targets = TARGETS if targets is None else targets
        self.seconds: defaultdict[str, float] = defaultdict(float)
        self.calls: Counter[str] = Counter()
        self._restore: list[tuple[Any, str, Any]] = []
        self._lock = threading.Lock()

    def __enter__(self) -> Timers:
        for label, module_name, path, _ in self.targets:
            try:
                owner: Any = importlib.import_module(module_name)
                *parents, name = path.split(".")
                for part in parents:
                    owner = getattr(owner, part)
                original = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
            except (ImportError, AttributeError, KeyError):
                continue
            self._restore.append((owner, name, original))
            setattr(owner, name, self._wrap(label, original))
        return self

    def __exit__(self, *exc: object) -> None:
        for owner, name, original in reversed(self._restore):
            setattr(owner, name, original)
        self._restore.clear()

    def _wrap(self, label: str, original: Any) -> Any:
        if isinstance(original, staticmethod | classmethod):
            return original  # not used by the targets; leave untouched
        fn: Callable[..., Any] = original

        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                elapsed = time.perf_counter() - started
                with self._lock:
                    self.seconds[label] += elapsed
                    self.calls[label] += 1

        return timed

    def rows(self, steps: int, step_ms: float) -> list[list[Any]]:
        """Table rows: label (children indented), calls, ms per step, share of ``step_ms``."""
        out: list[list[Any]] = []
        top = [(label, parent) for label, _, _, parent in self.targets if label in self.calls]
        for label, parent in top:
            if parent:
                continue
            out.append(self._row(label, steps, step_ms, ""))
            for child, child_parent in top:
                if child_parent == label:
                    out.append(self._row(child, steps, step_ms, "  "))
        return out

    def _row(self, label: str, steps: int, step_ms: float, indent: str) -> list[Any]:
        ms = self.seconds[label] / steps * 1000
        return [indent + label, self.calls[label], ms, f"{ms / step_ms:.0%}"]

    def top_level_ms(self, steps: int) -> float:
        """Milliseconds per step in all timed top-level functions together."""
        parents = {label for label, _, _, parent in self.targets if not parent}
        return sum(s for label, s in self.seconds.items() if label in parents) / steps * 1000
