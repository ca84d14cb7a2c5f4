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

import difflib
import hashlib
import importlib
import inspect
import json
import pkgutil
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import metadata
from typing import Any

from contreact.errors import detail
from contreact.tools.marks import Effect, mark_of

KEY_PARAMETER = "idempotency_key"
ENTRY_POINT_GROUP = "contreact.tools"


class ExtensionError(ValueError):
    """A tool or hook that cannot be loaded or used; the message is one line."""


def load_object(path: str, what: str, folders: Sequence[str] = ()) -> Any:
    """The object `package.module:name` (`name` may be dotted) names.

    Args:
        path: The import path.
        what: `tool` or `hook`, for the error line.
        folders: Folders searched for the module after the installed packages (the run
            config's own folder: `import_dirs`).

    Raises:
        ExtensionError: one line naming `path` and what is wrong, with a "did you mean".
    """
    module_name, _, attribute = path.partition(":")
    prefix = f"{what} {path} cannot be loaded"
    found: Any = _import(module_name, folders, prefix)
    walked: list[str] = []
    for part in attribute.split("."):
        owner = f"{module_name}:{'.'.join(walked)}" if walked else module_name
        try:
            found = getattr(found, part)
        except AttributeError:
            names = [n for n in dir(found) if not n.startswith("_")]
            hint = _did_you_mean(part, names)
            raise ExtensionError(f"{prefix}: {owner} has no {part}{hint}") from None
        except Exception as exc:  # noqa: BLE001 - a module's own __getattr__ may fail
            raise ExtensionError(
                f"{prefix}: reading {part} of {owner} failed: {detail(exc)}"
            ) from None
        walked.append(part)
    return found


def _did_you_mean(name: str, names: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(names), n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


def search_folders(folders: Sequence[str]) -> None:
    """Let modules in `folders` be imported, after everything already importable.

    Appended, never prepended: a file beside a config never shadows an installed module
    (nor the standard library) of the same name.
    """
    added = False
    for folder in folders:
        if folder not in sys.path:
            sys.path.append(folder)
            added = True
    if added:
        importlib.invalidate_caches()


def _import(module_name: str, folders: Sequence[str], prefix: str) -> Any:
    """Import `module_name`, every failure one line that starts with `prefix`."""
    search_folders(folders)
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or module_name
        if module_name != missing and not module_name.startswith(missing + "."):
            raise ExtensionError(
                f"{prefix}: {module_name} imports {missing}, which is not installed"
            ) from None
        where = f" (looked in the installed packages and {', '.join(folders)})" if folders else ""
        raise ExtensionError(
            f"{prefix}: there is no module {missing}{_did_you_mean_module(missing)}{where}"
        ) from None
    except SyntaxError as exc:
        raise ExtensionError(
            f"{prefix}: {exc.filename or module_name} line {exc.lineno}: {exc.msg}"
        ) from None
    except Exception as exc:  # noqa: BLE001 - any import failure becomes one line
        raise ExtensionError(f"{prefix}: importing {module_name} failed: {detail(exc)}") from None


def _did_you_mean_module(name: str) -> str:
    """` (did you mean x?)` for a module of the same package whose name is close to `name`."""
    parent, _, leaf = name.rpartition(".")
    try:
        where = importlib.import_module(parent).__path__ if parent else None
        names = [m.name for m in pkgutil.iter_modules(where)]
    except Exception:  # noqa: BLE001 - no package to look in: no suggestion
        return ""
    hint = _did_you_mean(leaf, names)
    return hint.replace("mean ", f"mean {parent}.") if parent and hint else hint


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
        raise ExtensionError(f"tool {source} is {_kind(fn)}, not a function")
    if not inspect.getdoc(fn):
        raise ExtensionError(f"tool {source} needs a docstring (the model reads it)")
    mark = mark_of(fn)
    tool_name = name or mark.name or fn.__name__
    try:
        structured = StructuredTool.from_function(
            fn, name=tool_name, parse_docstring=True, error_on_invalid_docstring=False
        )
        schema = convert_to_openai_tool(structured)
    except Exception as exc:  # noqa: BLE001 - a bad signature is the tool's author's to fix
        raise ExtensionError(
            f"tool {source} has no usable schema (from its type hints and docstring): {detail(exc)}"
        ) from None
    key_parameter = _key_parameter(fn)
    parameters = schema["function"].setdefault("parameters", {"type": "object"})
    properties = parameters.setdefault("properties", {})
    properties.pop(KEY_PARAMETER, None)
    parameters["required"] = [r for r in parameters.get("required", []) if r != KEY_PARAMETER]
    origin = {"name": tool_name, "effect": mark.effect, **identity(fn, source)}
    return CustomTool(tool_name, fn, schema, mark.effect, key_parameter, origin)


def _kind(obj: Any) -> str:
    """What `obj` is, for a person: `a class`, `a module`, `an object of class Foo`."""
    if inspect.isclass(obj):
        return "a class"
    if inspect.ismodule(obj):
        return "a module"
    return f"an object of class {getattr(type(obj), '__qualname__', '?')}"


def from_config(
    paths: Iterable[str], *, entry_points: bool, folders: Sequence[str] = ()
) -> list[CustomTool]:
    """The tools `tools.add` names, then those of the `contreact.tools` entry points.

    `folders`: searched for the tools' modules after the installed packages.
    """
    found = [custom_tool(load_object(path, "tool", folders), path) for path in paths]
    if entry_points:
        for point in metadata.entry_points(group=ENTRY_POINT_GROUP):
            try:
                fn = point.load()
            except Exception as exc:  # noqa: BLE001 - one line naming the entry point
                raise ExtensionError(
                    f"the {ENTRY_POINT_GROUP} entry point {point.name} ({point.value}) cannot "
                    f"be loaded: {detail(exc)}"
                ) from None
            found.append(custom_tool(fn, point.value, name=point.name))
    return found


def from_python(functions: Iterable[Any]) -> list[CustomTool]:
    """Tools handed over as functions (`contreact.run(config, tools=[...])`)."""
    return [
        custom_tool(fn, f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', fn)}")
        for fn in functions
    ]
