"""A run's extensions as loaded: its toolset and its hooks, built once per run context.

Built from the config (`tools.add`, `tools.disable`, entry points, `hooks`) and what a
Python caller handed over (`Context.extensions`). A tool or hook that cannot be loaded is an
`ExtensionError` before the run moves.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from contreact.extensions.hooks import (
    HOOK_POINTS,
    Hook,
    HookPoint,
    ToolDecision,
    before_tool_call,
    call_hooks,
)
from contreact.graph.state import Context
from contreact.tools.custom import ExtensionError, from_config, from_python, load_object
from contreact.tools.registry import Toolset


@dataclass(frozen=True)
class Extensions:
    """The toolset and hooks of one run."""

    toolset: Toolset
    hooks: tuple[Hook, ...] = ()
    disabled: tuple[str, ...] = ()

    def call(self, point: HookPoint, info: Mapping[str, Any]) -> list[tuple[Hook, Any]]:
        """Call `point` on every hook that has it, in order; their answers (`call_hooks`)."""
        return call_hooks(self.hooks, point, info)

    def before_tool_call(self, info: Mapping[str, Any]) -> ToolDecision:
        """Ask the before-tool hooks what to do with a call (`hooks.before_tool_call`)."""
        return before_tool_call(self.hooks, info)

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
    loaded = [Hook(path, load_object(path, "hook", ctx.import_dirs)) for path in ctx.hooks]
    handed = (ctx.extensions or {}).get("hooks") or ()
    for obj in handed:
        name = getattr(obj, "__qualname__", None) or type(obj).__qualname__
        loaded.append(Hook(f"{getattr(obj, '__module__', '?')}:{name}", obj))
    for hook in loaded:
        if not hook.points:
            raise ExtensionError(
                f"hook {hook.source} has none of the methods {', '.join(HOOK_POINTS)}"
            )
        unbound = _needs_an_instance(hook)
        if unbound:
            made = getattr(hook.obj, "__qualname__", "Guard")
            raise ExtensionError(
                f"hook {hook.source} is a class whose {', '.join(unbound)} take `self`: name "
                f"an instance instead (`guard = {made}()` in its module, then "
                "`module:guard`), or make those methods static"
            )
    return tuple(loaded)


def _needs_an_instance(hook: Hook) -> list[str]:
    """The hook points of a class given as a hook that are plain methods (they take `self`).

    Called on the class, such a method would take the call's dict for `self` and fail in
    the run's first cycle; a static or class method is called as it is.
    """
    if not inspect.isclass(hook.obj):
        return []
    plain = []
    for point in hook.points:
        for owner in inspect.getmro(hook.obj):
            if point in vars(owner):
                found = vars(owner)[point]
                if inspect.isfunction(found):
                    plain.append(point)
                break
    return plain


def build_extensions(ctx: Context) -> Extensions:
    """The run's toolset and hooks, loaded now (import errors are `ExtensionError`s)."""
    handed = ctx.extensions or {}
    custom = [
        *from_config(ctx.tools.add, entry_points=ctx.tools.entry_points, folders=ctx.import_dirs),
        *from_python(handed.get("tools") or ()),
    ]
    toolset = Toolset.of(ctx.tools.disable, custom, ctx.tools.timeout_s)
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
