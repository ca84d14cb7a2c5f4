"""A run's extensions: its toolset, its hooks, and the calls that reach the hooks.

Built once per run context from the config (`tools.add`, `tools.disable`, entry points,
`hooks`) and what a Python caller handed over (`Context.extensions`). Hooks are called
inside the journaled effect of the step they belong to (`Ledger.once`'s act): a step whose
result is recorded does not call them again when it is replayed, and a hook that raises
rolls its step back, so the run fails with one line (`HookError`) and `resume` after the
fix runs the step afresh.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

from contreact.errors import detail
from contreact.graph.state import Context
from contreact.tools.custom import ExtensionError, from_config, from_python, identity, load_object
from contreact.tools.registry import Toolset

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
    """A hook raised: the step fails, the run fails with this one line."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


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
    rewritten_by: list[str] | None = None


@dataclass(frozen=True)
class Extensions:
    """The toolset and hooks of one run."""

    toolset: Toolset
    hooks: tuple[Hook, ...] = ()
    disabled: tuple[str, ...] = ()

    def call(self, point: HookPoint, info: Mapping[str, Any]) -> list[tuple[Hook, Any]]:
        """Call `point` on every hook that has it, in order; their answers.

        Raises:
            HookError: a hook raised (one line naming it, the point and the error).
        """
        answers = []
        for hook in self.hooks:
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

    def before_tool_call(self, info: Mapping[str, Any]) -> ToolDecision:
        """Ask the before-tool hooks what to do with a call.

        `{"veto": reason}` stops the call, `{"args": {...}}` changes its arguments (later
        hooks see the change); anything else lets it run.
        """
        args = dict(info["args"])
        rewritten: list[str] = []
        for hook in self.hooks:
            if not callable(getattr(hook.obj, "before_tool_call", None)):
                continue
            [(_, answer)] = Extensions(self.toolset, (hook,)).call(
                "before_tool_call", {**info, "args": args}
            )
            if isinstance(answer, Mapping) and answer.get("veto") is not None:
                return ToolDecision(args, hook.source, str(answer["veto"]), rewritten or None)
            if isinstance(answer, Mapping) and isinstance(answer.get("args"), Mapping):
                args = dict(answer["args"])
                rewritten.append(hook.source)
        return ToolDecision(args, rewritten_by=rewritten or None)

    @property
    def record(self) -> dict[str, Any] | None:
        """The EXTENSIONS payload's fields; None for a run with nothing of its own."""
        if not (self.toolset.custom or self.hooks or self.disabled):
            return None
        return {
            "tools": [t.origin for t in self.toolset.custom.values()],
            "hooks": [h.origin for h in self.hooks],
            "disabled": list(self.disabled),
        }


def _hooks_of(ctx: Context) -> tuple[Hook, ...]:
    loaded = [Hook(path, load_object(path, "hook")) for path in ctx.hooks]
    handed = (ctx.extensions or {}).get("hooks") or ()
    for obj in handed:
        name = getattr(obj, "__qualname__", None) or type(obj).__qualname__
        loaded.append(Hook(f"{getattr(obj, '__module__', '?')}:{name}", obj))
    for hook in loaded:
        if not hook.points:
            raise ExtensionError(
                f"hook {hook.source!r} has none of the methods {', '.join(HOOK_POINTS)}"
            )
    return tuple(loaded)


def build_extensions(ctx: Context) -> Extensions:
    """The run's toolset and hooks, loaded now (import errors are `ExtensionError`s)."""
    handed = ctx.extensions or {}
    custom = [
        *from_config(ctx.tools.add, entry_points=ctx.tools.entry_points),
        *from_python(handed.get("tools") or ()),
    ]
    toolset = Toolset.of(ctx.tools.disable, custom)
    return Extensions(toolset, _hooks_of(ctx), tuple(ctx.tools.disable))


_built: dict[int, tuple[Context, Extensions]] = {}
_lock = threading.Lock()
_KEPT = 32


def extensions_of(ctx: Context) -> Extensions:
    """The extensions of `ctx`, built once per context object (a run's drive keeps one)."""
    with _lock:
        found = _built.get(id(ctx))
        if found is not None and found[0] is ctx:
            return found[1]
    built = build_extensions(ctx)
    with _lock:
        # The context is kept with its entry, so its id cannot be reused while cached.
        _built[id(ctx)] = (ctx, built)
        while len(_built) > _KEPT:
            _built.pop(next(iter(_built)))
    return built


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


def applying(items: Sequence[Any], cycle: int, kind: str) -> list[tuple[int, Any]]:
    """The interventions of `kind` that act in `cycle`, with their index in the config."""
    return [(i, x) for i, x in enumerate(items) if x.kind == kind and x.applies_to(cycle)]
