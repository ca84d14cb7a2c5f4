"""The house's rules, read from the source: every import resolves to a file, none points up.

Each `contreact...` import in the product (at module level or inside a function, but not
under `TYPE_CHECKING`) must resolve to a file of this repository by its path alone, so
go-to-definition, `git log` and import maps see the module where it is imported from.
The allowed directions are those of docs/architecture.md: nodes never reach the faces or
analysis, the stub stands alone, checkpoints are the bottom, and no module imports
itself back through others.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "contreact"

FORBIDDEN: dict[str, set[str]] = {
    "nodes": {"analysis", "cli", "runner", "progress", "batch", "doctor", "evaluate", "console"},
    "stub": {"graph", "nodes", "checkpoints", "tools", "analysis", "cli", "runner", "config"},
    "analysis": {"cli", "runner", "progress", "console", "engine"},
    "tools": {"nodes", "graph", "analysis", "cli", "runner", "console"},
    "checkpoints": {"graph", "nodes", "tools", "analysis", "cli", "runner", "config", "stub"},
    "graph": {"analysis", "cli", "runner", "progress", "console"},
    "console": {"cli"},  # a face of its own: it calls the services, never the command line
    "engine": {"cli", "console"},
    "text": {
        "graph",
        "nodes",
        "tools",
        "checkpoints",
        "analysis",
        "cli",
        "runner",
        "config",
        "stub",
    },  # fmt: skip
}
"""Package (first part under `contreact`) -> packages or modules it must never import."""


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_file(name: str) -> Path | None:
    base = ROOT.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    """The ids of the import nodes inside `if TYPE_CHECKING:` blocks (not imported at run time)."""
    hidden: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            hidden |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return hidden


def imports_of(path: Path) -> Iterator[tuple[int, str]]:
    """(line, module) of every run-time `contreact` import in `path`, resolved to modules."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    hidden = _type_checking_nodes(tree)
    here = module_name(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    for node in ast.walk(tree):
        if id(node) in hidden:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "contreact":
                    yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, node.module] if node.module else anchor)
            else:
                base = node.module or ""
            if base.split(".")[0] != "contreact":
                continue
            for alias in node.names:
                # `from contreact.a import b`: b is a submodule when it has a file.
                sub = f"{base}.{alias.name}"
                yield node.lineno, sub if module_file(sub) else base


def product_files() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def graph() -> dict[str, set[str]]:
    return {module_name(path): {name for _, name in imports_of(path)} for path in product_files()}


def test_every_contreact_import_resolves_to_a_file_by_its_path() -> None:
    unresolved = [
        f"{path.relative_to(ROOT)}:{line}: {name}"
        for path in product_files()
        for line, name in imports_of(path)
        if module_file(name) is None
    ]
    assert unresolved == []
    # The walk sees the whole product (every card package, and the imports inside them).
    seen = graph()
    for package in ("graph", "nodes", "tools", "checkpoints"):
        assert any(m.startswith(f"contreact.{package}.") for m in seen), package
    assert "contreact.nodes.step" in seen["contreact.nodes.assemble"]


def _area(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


@pytest.mark.parametrize("area", sorted(FORBIDDEN))
def test_no_import_points_the_wrong_way(area: str) -> None:
    broken = [
        f"{path.relative_to(ROOT)}:{line}: imports {name}"
        for path in product_files()
        if _area(module_name(path)) == area
        for line, name in imports_of(path)
        if _area(name) in FORBIDDEN[area]
    ]
    assert broken == []


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                group.append(top)
                if top == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def _without_packages(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    # A package's own `__init__` importing its modules (and them importing a sibling
    # through the package) is how Python packages work, not a loop between modules.
    def related(a: str, b: str) -> bool:
        return a.startswith(b + ".") or b.startswith(a + ".")

    return {
        source: {t for t in targets if not related(source, t)} for source, targets in edges.items()
    }


def test_no_import_cycles() -> None:
    assert cycles(_without_packages(graph())) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
