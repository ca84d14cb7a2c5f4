"""A tool of your own, run so that nothing it does can stop or wedge its run.

A tool is someone else's code. It may call `sys.exit`, raise `KeyboardInterrupt` or some
other `BaseException` that no `except Exception` catches, or never return. Each of those
would end the run's process or hold its step forever, and a resume would call the tool
again and meet the same fate. So the call runs in a daemon thread of its own and the
driving thread waits for it, at most `timeout_s`:

- whatever the tool raises is caught in its thread. An `Exception` goes back to the
  caller as it was raised (the step's own handling of a failing tool, and LangGraph's
  interrupts, stay as they are); anything else becomes `Escaped`, never a stop.
- A `KeyboardInterrupt` caught there came from the tool: Python delivers a signal (a real
  Ctrl-C, SIGTERM's handler) to the main thread, which is waiting here, so a person's
  Ctrl-C still stops the run.
- A call still running at `timeout_s` is `Abandoned`: Python cannot kill a thread, so it
  is left to finish (or not) on its own, and whatever it returns is dropped.

The thread runs in a copy of the caller's context, so what a tool reads from context
variables (LangGraph's config, a tracing span) is what it would read in the caller.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Returned(Generic[T]):
    """The call returned `value`."""

    value: T


@dataclass(frozen=True)
class Escaped:
    """The call raised a `BaseException` that is not an `Exception` (`sys.exit`, ...)."""

    error: BaseException

    @property
    def said(self) -> str:
        """What was raised, for a person: `SystemExit(5)`, `KeyboardInterrupt`, `Stop(why)`."""
        return raised(self.error)


@dataclass(frozen=True)
class Abandoned:
    """The call had not returned after `seconds`; its thread was left behind."""

    seconds: float


Outcome = Returned[T] | Escaped | Abandoned
"""How a contained call ended (an `Exception` is raised again instead)."""

DETAIL_CHARS = 120
"""How much of what an escaped exception says `raised` quotes."""


def raised(error: BaseException) -> str:
    """`Name(first line of its message)`, or `Name` for one that says nothing."""
    lines = str(error).strip().splitlines()
    text = lines[0] if lines else ""
    if len(text) > DETAIL_CHARS:
        text = text[: DETAIL_CHARS - 1] + "…"
    name = type(error).__name__
    return f"{name}({text})" if text else name


class _Call(Generic[T]):
    """One call in its own thread, and what became of it."""

    def __init__(self, fn: Callable[[], T]) -> None:
        self.fn = fn
        self.done = threading.Event()
        self.value: Returned[T] | None = None
        self.error: BaseException | None = None

    def __call__(self) -> None:
        try:
            self.value = Returned(self.fn())
        except BaseException as exc:  # noqa: BLE001 - every escape is the caller's to report
            self.error = exc
        finally:
            self.done.set()


def contained(fn: Callable[[], T], timeout_s: float | None, name: str = "tool") -> Outcome[T]:
    """Call `fn` in a daemon thread and wait for it, at most `timeout_s` (None: no limit).

    Raises:
        Exception: whatever `fn` raised, if it is an `Exception`, as it was raised.
    """
    call = _Call(fn)
    context = contextvars.copy_context()
    thread = threading.Thread(
        target=context.run, args=(call,), name=f"contreact-{name}", daemon=True
    )
    thread.start()
    # The wait, not the tool, is where a signal's KeyboardInterrupt lands: it goes on up.
    if not call.done.wait(timeout_s):
        return Abandoned(float(timeout_s or 0))
    if call.error is None:
        assert call.value is not None
        return call.value
    if isinstance(call.error, Exception):
        raise call.error
    return Escaped(call.error)
