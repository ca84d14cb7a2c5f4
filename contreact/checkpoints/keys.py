"""Every key of the journal and the event log, built here and nowhere else.

A side effect's key names its place in the run (cycle, model call, tool call); together
with the scope (run id and lineage, see `checkpoints.lineage`) it identifies the effect
exactly once: a step re-run after a crash builds the same key in the same scope and
replays the record, a step on another branch builds it in another scope and acts afresh.
Keys are built from checkpointed counters only, never from checkpoint ids (a checkpoint
that was never saved gets a new id when its step is replayed). `position_of` reads a key
back, so a branch can inherit exactly the records made before its fork point.
"""

from __future__ import annotations

import re
from typing import NamedTuple

RUN_START = "run:start"
TOOL_MODE = "run:tool-mode"
"""The run's tool mode (native or text), decided once at its first step."""

EXTENSIONS = "run:extensions"
"""The run's EXTENSIONS event and its `on_run_start` hooks, once per scope."""

RUN_LEVEL = frozenset({RUN_START, TOOL_MODE, EXTENSIONS})
"""The run-level keys a cycle may look up (each once per scope): kept in memory with the
latest cycles' (`journal.Ledger`). The numbered ones below are looked up once per resume."""


def branch_start(scope: str) -> str:
    """The RUN_START of a branch (a `contreact fork` or a Studio time travel) in its scope."""
    return f"run:fork:{scope}"


def host_change(n: int) -> str:
    """The `n`-th HOST_CHANGE (0-based): `resume --host` moved the run to another server."""
    return f"run:host:{n}"


def provenance(n: int) -> str:
    """The `n`-th PROVENANCE (0-based): the record made as a resume or an extension began."""
    return f"run:provenance:{n}"


def cycle_start(cycle: int) -> str:
    """CYCLE_START of `cycle`."""
    return f"c{cycle}:start"


def model_call(cycle: int, step: int) -> str:
    """The model call number `step` (0-based) of `cycle`: journal record and LLM_INVOCATION."""
    return f"c{cycle}:s{step}:llm"


def record_skipped(key: str) -> str:
    """The RECORD_SKIPPED of the journal record `key` (`resume --skip-bad-record`)."""
    return f"{key}:skipped"


def model_error(cycle: int, step: int, attempt: int) -> str:
    """The ERROR of a failed model call (`attempt` counts the resumes that failed again)."""
    return f"c{cycle}:s{step}:error:{attempt}"


def model_error_prefix(cycle: int, step: int) -> str:
    """What every `model_error` key of one call starts with."""
    return f"c{cycle}:s{step}:error:"


def parse_failure(cycle: int, step: int) -> str:
    """The ERROR of an answer that got a corrective turn (see `nodes.parse`)."""
    return f"c{cycle}:s{step}:parse"


def tool_call(cycle: int, step: int, index: int) -> str:
    """Call number `index` of the answer of model call `step`: journal record and TOOL_CALL."""
    return f"c{cycle}:s{step}:t{index}"


def operator_message(cycle: int, step: int, index: int) -> str:
    """The OPERATOR_MESSAGE of a `send_message_to_operator` call."""
    return f"{tool_call(cycle, step, index)}:operator"


def tool_error(cycle: int, step: int, index: int) -> str:
    """The ERROR of a tool that raised unexpectedly."""
    return f"{tool_call(cycle, step, index)}:error"


def tool_hook(cycle: int, step: int, index: int, action: str) -> str:
    """The HOOK event of a call a before-tool hook vetoed or rewrote (`action`)."""
    return f"{tool_call(cycle, step, index)}:hook:{action}"


def tool_intervention(cycle: int, step: int, index: int) -> str:
    """The INTERVENTION event of a call a `tool_fails` intervention answered."""
    return f"{tool_call(cycle, step, index)}:intervention"


def intervention(cycle: int, index: int) -> str:
    """Intervention `index` of the config, applied as `cycle` opens: journal record and event."""
    return f"c{cycle}:intervention:{index}"


def context_trim(cycle: int, step: int) -> str:
    """CONTEXT_TRIM before model call `step`."""
    return f"c{cycle}:s{step}:trim"


def cycle_end(cycle: int) -> str:
    """The cycle's close: journal record and CYCLE_END."""
    return f"c{cycle}:end"


def similarity(cycle: int) -> str:
    """SIMILARITY of the cycle's reflection."""
    return f"c{cycle}:similarity"


def run_end(cycle: int) -> str:
    """RUN_END after the last cycle."""
    return f"c{cycle}:run-end"


def call_id(cycle: int, step: int, index: int) -> str:
    """The `tool_call_id` of a parsed call (native or text format), fixed by its place."""
    return f"c{cycle}-s{step}-t{index}"


def ai_message_id(cycle: int, step: int) -> str:
    """The message id of the model's answer to call `step`."""
    return f"c{cycle}-ai-{step}"


class KeyPosition(NamedTuple):
    """Where in a run a key's record was made."""

    cycle: int | None
    """None for run-level keys (`run:start`)."""
    step: int | None
    """The model call it belongs to; None for cycle-level keys."""
    tool: bool
    """Made by a tool call (its record, TOOL_CALL, OPERATOR_MESSAGE or tool ERROR)."""
    kind: str
    """The key's last part: `llm`, `start`, `end`, `run-end`, ..."""


_CYCLE = re.compile(r"^c(\d+):")


def cycle_of(key: str) -> int | None:
    """The cycle a key belongs to (its record's `cycle`); None for run-level keys."""
    match = _CYCLE.match(key)
    return int(match.group(1)) if match else None


_KEY = re.compile(r"^c(\d+):(?:s(\d+):)?(t\d+(?::.*)?|.+)$")


def position_of(key: str) -> KeyPosition:
    """Read back where a key was made (the inverse of the builders above)."""
    match = _KEY.match(key)
    if match is None:
        return KeyPosition(None, None, False, key)
    cycle, step, rest = match.groups()
    tool = rest.startswith("t") and (rest[1:].split(":")[0]).isdigit()
    return KeyPosition(
        int(cycle), int(step) if step is not None else None, tool, rest.split(":", 1)[0]
    )
