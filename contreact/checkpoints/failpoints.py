"""Named crash points for crash-recovery tests (`CONTREACT_FAILPOINTS=name,name`), and a tally.

A real `kill -9` at a random moment rarely lands in the narrow windows that matter (a
side effect committed, its checkpoint not yet written). A failpoint sends the process
SIGKILL at exactly such a named moment, so the crash tests can prove every window
recovers. With the variable unset (always, outside tests) each check is a dictionary lookup.
The variables are read when checked, not when imported: a process forked from a server
that imported this module long before still obeys the environment it was given.
"""

from __future__ import annotations

import os
import signal
from functools import lru_cache


@lru_cache(maxsize=4)
def _parsed(value: str) -> frozenset[str]:
    return frozenset(p.strip() for p in value.split(",") if p.strip())


def armed() -> frozenset[str]:
    """The failpoints `CONTREACT_FAILPOINTS` names now."""
    return _parsed(os.environ.get("CONTREACT_FAILPOINTS", ""))


def failpoint(name: str) -> None:
    """Die at once (SIGKILL, like a power cut for this process) if `name` is armed.

    Armed as `stop:NAME`, the process stops itself there instead (SIGSTOP), for a test
    that kills something else at that moment: the worker driving this process, say,
    while a tool's effect is done and not yet committed.
    """
    active = armed()
    if not active:
        return
    if name in active:
        os.kill(os.getpid(), signal.SIGKILL)
    if f"stop:{name}" in active:
        os.kill(os.getpid(), signal.SIGSTOP)


def tally(name: str) -> None:
    """Count one execution of `name` in `CONTREACT_TALLY_FILE`, if set (crash tests).

    The crash tests compare how often tools really ran across kills and resumes with an
    uninterrupted run: a replayed step must not run its tool again.
    """
    tally_file = os.environ.get("CONTREACT_TALLY_FILE", "")
    if tally_file:
        with open(tally_file, "a", encoding="utf-8") as fh:
            fh.write(name + "\n")
