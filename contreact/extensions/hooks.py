"""Hooks: objects called at points of a run, and the typed answers a tool-call guard gives.

A hook is called inside the journaled effect of the step it belongs to (`Ledger.once`'s
act): a step whose result is recorded does not call it again when it is replayed, and a
hook that raises rolls its step back, so the run fails with one line (`HookError`) and
`resume` after the fix runs the step afresh.

`before_tool_call` is a guard, so it fails closed: its answer is `None` (go on), `Veto`
or `Rewrite` (or the dict forms `{"veto": reason}` and `{"args": {...}}`); anything else
is a mistake in the hook, and the run stops before the tool runs, naming the hook and what
it returned. A guard that let calls through on a typo would look like a guard and be none.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from contreact.errors import detail
from contreact.text.messages import cut
from contreact.tools.custom import identity

HookPoint = Literal[
    "on_run_start",
    "before_model_call",
    "after_model_call",
    "before_tool_call",
    "after_tool_call",
    "on_cycle_end",
    "on_run_end",
]

HOOK_POINTS: tuple[HookPoint, ...] = get_args(HookPoint)
"""The methods a hook may have; each is called with one dict (see the call sites)."""


class HookError(Exception):
    """A hook raised or answered what it may not: the step fails, the run fails with this line."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class Veto:
    """A `before_tool_call` answer: the call does not run; the model is told `reason`."""

    reason: str

    def __post_init__(self) -> None:
        if not isinstance(self.reason, str) or not self.reason.strip():
            raise TypeError("Veto(reason) needs the reason as non-empty text")


@dataclass(frozen=True)
class Rewrite:
    """A `before_tool_call` answer: the call runs with `args` instead (later hooks see them)."""

    args: Mapping[str, Any]

    def __post_init__(self) -> None:
        if not isinstance(self.args, Mapping) or not all(isinstance(k, str) for k in self.args):
            raise TypeError("Rewrite(args) needs the arguments as a mapping of names to values")


ToolCallAnswer = Veto | Rewrite | None
"""What a `before_tool_call` hook may answer: veto, rewrite, or `None` to let the call run."""


@dataclass(frozen=True)
class Hook:
    """One hook object and where it came from."""

    source: str
    obj: Any

    @property
    def points(self) -> list[str]:
        """The hook points this object answers."""
        return [p for p in HOOK_POINTS if callable(getattr(self.obj, p, None))]

    @property
    def origin(self) -> dict[str, Any]:
        """What the run records about it."""
        described = self.obj if inspect.ismodule(self.obj) or inspect.isclass(self.obj) else None
        return {
            **identity(described or type(self.obj), self.source),
            "points": self.points,
        }


@dataclass(frozen=True)
class ToolDecision:
    """What the before-tool hooks made of a call: run it (maybe rewritten) or not."""

    args: dict[str, Any]
    vetoed_by: str | None = None
    reason: str = ""
    rewritten_by: list[str] = field(default_factory=list)


def call_hooks(
    hooks: Sequence[Hook], point: HookPoint, info: Mapping[str, Any]
) -> list[tuple[Hook, Any]]:
    """Call `point` on every hook that has it, in order; their answers.

    Raises:
        HookError: a hook raised (one line naming it, the point and the error).
    """
    answers = []
    for hook in hooks:
        method = getattr(hook.obj, point, None)
        if not callable(method):
            continue
        try:
            answers.append((hook, method(dict(info))))
        except Exception as exc:  # noqa: BLE001 - any hook failure fails the step
            # What it said, not its class (`--debug` shows the traceback); the run's
            # failure line adds how to go on once the hook is fixed.
            raise HookError(
                f"hook {hook.source} {point} failed: {detail(exc)} (cycle {info.get('cycle')})"
            ) from exc
    return answers


def tool_call_answer(hook: Hook, answer: object) -> ToolCallAnswer:
    """A `before_tool_call` answer as its typed value; raises `HookError` for anything else."""
    if answer is None or isinstance(answer, Veto | Rewrite):
        return answer
    if isinstance(answer, Mapping) and set(answer) == {"veto"}:
        reason = answer["veto"]
        if isinstance(reason, str) and reason.strip():
            return Veto(reason)
    if isinstance(answer, Mapping) and set(answer) == {"args"}:
        args = answer["args"]
        if isinstance(args, Mapping) and all(isinstance(k, str) for k in args):
            return Rewrite(args)
    raise HookError(
        f"hook {hook.source} before_tool_call returned {cut(repr(answer), 200)}: a guard "
        "answers None (the call runs), Veto(reason) or Rewrite(args) (or {'veto': reason} "
        "or {'args': {...}}); the tool did not run"
    )


def before_tool_call(hooks: Sequence[Hook], info: Mapping[str, Any]) -> ToolDecision:
    """Ask the before-tool hooks, in order, what to do with a call.

    A veto stops the call; a rewrite changes its arguments for the hooks after it and for
    the tool. Whatever else a hook answers stops the run before the tool runs.

    Raises:
        HookError: a hook raised or answered something that is not a tool-call answer.
    """
    args = dict(info["args"])
    rewritten: list[str] = []
    for hook in hooks:
        if not callable(getattr(hook.obj, "before_tool_call", None)):
            continue
        [(_, answer)] = call_hooks([hook], "before_tool_call", {**info, "args": args})
        decided = tool_call_answer(hook, answer)
        if isinstance(decided, Veto):
            return ToolDecision(args, hook.source, decided.reason, rewritten)
        if isinstance(decided, Rewrite):
            args = dict(decided.args)
            rewritten.append(hook.source)
    return ToolDecision(args, rewritten_by=rewritten)


def tool_call_info(
    cycle: int, step: int, index: int, name: str, args: Mapping[str, Any], key: str
) -> dict[str, Any]:
    """What `before_tool_call` and `after_tool_call` are told about a call."""
    return {
        "cycle": cycle,
        "step": step,
        "index": index,
        "name": name,
        "args": dict(args),
        "key": key,
    }
