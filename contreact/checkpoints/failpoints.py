"""Named crash points for crash-recovery tests (`CONTREACT_FAILPOINTS=name,name`), and a tally.

A real `kill -9` at a random moment rarely lands in the narrow windows that matter (a
side effect committed, its checkpoint not yet written). A failpoint sends the process
SIGKILL at exactly such a named moment, so the crash tests can prove every window
recovers. With the variable unset (always, outside tests) each check is one set lookup.
"""

from __future__ import annotations

import os
import signal

_ARMED = frozenset(
    p.strip() for p in os.environ.get("CONTREACT_FAILPOINTS", "").split(",") if p.strip()
)


def failpoint(name: str) -> None:
    """Die at once (SIGKILL, like a power cut for this process) if `name` is armed.

    Armed as `stop:NAME`, the process stops itself there instead (SIGSTOP), for a test
    that kills something else at that moment: the worker driving this process, say,
    while a tool's effect is done and not yet committed.
    """
    if name in _ARMED:
        os.kill(os.getpid(), signal.SIGKILL)
    if _ARMED and f"stop:{name}" in _ARMED:
        os.kill(os.getpid(), signal.SIGSTOP)


_TALLY_FILE = os.environ.get("CONTREACT_TALLY_FILE", "")


def tally(name: str) -> None:
    """Count one execution of `name` in `CONTREACT_TALLY_FILE`, if set (crash tests).

    The crash tests compare how often tools really ran across kills and resumes with an
    uninterrupted run: a replayed step must not run its tool again.
    """
    if _TALLY_FILE:
        with open(_TALLY_FILE, "a", encoding="utf-8") as fh:
            fh.write(name + "\n")
