"""Tools of your own: found by import path or entry point, described by langchain-core.

A tool is a typed function returning text. Its schema comes from its type hints and
docstring through langchain-core (`StructuredTool.from_function`, `convert_to_openai_tool`),
so there is no schema generator here. A parameter named `idempotency_key`, or annotated
with langchain-core's `InjectedToolArg`, is left out of the schema and filled with the
call's key, the same on every attempt of that call: an effectful tool deduplicates on it.

Each tool carries its identity (import path, distribution and version, a hash of its
source) for the run's record, so a result can be traced to the code that made it.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import metadata
from typing import Any

from contreact.tools.marks import Effect, mark_of

KEY_PARAMETER = "idempotency_key"
ENTRY_POINT_GROUP = "contreact.tools"


class ExtensionError(ValueError):
    """A tool or hook that cannot be loaded or used; the message is one line."""


def load_object(path: str, what: str) -> Any:
    """The object `package.module:name` (`name` may be dotted) names."""
    module_name, _, attribute = path.partition(":")
    try:
        found: Any = importlib.import_module(module_name)
        for part in attribute.split("."):
            found = getattr(found, part)
    except Exception as exc:  # noqa: BLE001 - any import failure becomes one line
        detail = str(exc).splitlines()[0] if str(exc) else "no detail"
        raise ExtensionError(
            f"cannot load {what} {path!r}: {type(exc).__name__}: {detail}"
        ) from None
    return found


@cache
def _distributions() -> Mapping[str, list[str]]:
    return metadata.packages_distributions()


def identity(obj: Any, source: str) -> dict[str, Any]:
    """Where an object comes from: its import path, distribution and version, source hash."""
    module = inspect.getmodule(obj)
    top = (getattr(module, "__name__", "") or "").split(".")[0]
    dists = _distributions().get(top, [])
    version = None
    if dists:
        try:
            version = metadata.version(dists[0])
        except metadata.PackageNotFoundError:
            version = None
    try:
        text = inspect.getsource(module if module is not None else obj)
        digest: str | None = hashlib.sha256(text.encode("utf-8")).hexdigest()
    except (OSError, TypeError):
        digest = None
    return {
        "import_path": source,
        "distribution": dists[0] if dists else None,
        "version": version,
        "source_sha256": digest,
    }


@dataclass(frozen=True)
class CustomTool:
    """One tool of your own, ready to offer and to run."""

    name: str
    function: Callable[..., Any]
    schema: dict[str, Any]
    """The Ollama/OpenAI function schema (the injected key left out)."""
    effect: Effect
    key_parameter: str | None
    """The parameter the call's idempotency key goes into; None: the tool takes none."""
    origin: dict[str, Any] = field(default_factory=dict)
    """`identity` of the function, with its name and effect: what the run records."""

    def __call__(self, args: Mapping[str, Any], key: str) -> str:
        """Run the tool on the model's arguments and the call's key; its output as text."""
        extra = {self.key_parameter: key} if self.key_parameter else {}
        result = self.function(**args, **extra)
        if isinstance(result, str):
            return result
        return json.dumps(result, ensure_ascii=False, default=str)


def _key_parameter(fn: Callable[..., Any]) -> str | None:
    """The parameter that takes the idempotency key: by name, or `InjectedToolArg`."""
    from langchain_core.tools.base import _is_injected_arg_type

    for parameter in inspect.signature(fn, eval_str=True).parameters.values():
        if parameter.name == KEY_PARAMETER:
            return parameter.name
        if parameter.annotation is not inspect.Parameter.empty and _is_injected_arg_type(
            parameter.annotation
        ):
            return parameter.name
    return None


def custom_tool(fn: Any, source: str, name: str | None = None) -> CustomTool:
    """Build a tool from a function, named by `name`, its mark, or the function's own name."""
    from langchain_core.tools import StructuredTool
    from langchain_core.utils.function_calling import convert_to_openai_tool

    if not callable(fn) or not (inspect.isfunction(fn) or inspect.ismethod(fn)):
        raise ExtensionError(f"tool {source!r} is not a function ({type(fn).__name__})")
    if not inspect.getdoc(fn):
        raise ExtensionError(f"tool {source!r} needs a docstring (the model reads it)")
    mark = mark_of(fn)
    tool_name = name or mark.name or fn.__name__
    try:
        structured = StructuredTool.from_function(
            fn, name=tool_name, parse_docstring=True, error_on_invalid_docstring=False
        )
        schema = convert_to_openai_tool(structured)
    except Exception as exc:  # noqa: BLE001 - a bad signature is the tool's author's to fix
        raise ExtensionError(
            f"tool {source!r} has no usable schema: {type(exc).__name__}: {exc}"
        ) from None
    key_parameter = _key_parameter(fn)
    parameters = schema["function"].setdefault("parameters", {"type": "object"})
    properties = parameters.setdefault("properties", {})
    properties.pop(KEY_PARAMETER, None)
    parameters["required"] = [r for r in parameters.get("required", []) if r != KEY_PARAMETER]
    origin = {"name": tool_name, "effect": mark.effect, **identity(fn, source)}
    return CustomTool(tool_name, fn, schema, mark.effect, key_parameter, origin)


def from_config(paths: Iterable[str], *, entry_points: bool) -> list[CustomTool]:
    """The tools `tools.add` names, then those of the `contreact.tools` entry points."""
    found = [custom_tool(load_object(path, "tool"), path) for path in paths]
    if entry_points:
        for point in metadata.entry_points(group=ENTRY_POINT_GROUP):
            try:
                fn = point.load()
            except Exception as exc:  # noqa: BLE001 - one line naming the entry point
                raise ExtensionError(
                    f"cannot load the {ENTRY_POINT_GROUP} entry point {point.name!r} "
                    f"({point.value}): {type(exc).__name__}: {exc}"
                ) from None
            found.append(custom_tool(fn, point.value, name=point.name))
    return found


def from_python(functions: Iterable[Any]) -> list[CustomTool]:
    """Tools handed over as functions (`contreact.run(config, tools=[...])`)."""
    return [
        custom_tool(fn, f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', fn)}")
        for fn in functions
    ]
