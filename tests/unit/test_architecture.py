"""The house's rules, read from the source: every import resolves to a file, none points up.

Each `contreact...` import in the product (at module level or inside a function, but not
under `TYPE_CHECKING`) must resolve to a file of this repository by its path alone, so
go-to-definition, `git log` and import maps see the module where it is imported from.
The layers are docs/architecture.md's table, held equal to `LAYERS` here: a module imports
only its own package and the layers below it; the stub stands apart; no module imports
itself back through others, counting a package's `__init__` and imports inside functions.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "contreact"

LAYERS: list[tuple[str, ...]] = [
    ("text", "version"),
    ("errors",),
    ("checkpoints",),
    ("tools",),
    ("ollama",),
    ("config",),
    ("graph.state",),
    ("extensions",),
    ("nodes",),
    ("graph",),
    ("analysis",),
    ("engine",),
    ("studies",),
    ("console",),
    ("cli", "contreact"),
    ("__main__",),
]
"""Layers from the bottom up: a module may import its own layer's package and lower layers.

`graph.state` (the state and context every node reads) sits below the nodes, the rest of
`graph` (the wiring of the nodes) above them. The console calls the services, never the
command line; the command line's `ui` starts it. `contreact` is the package's front door."""

STUB_USERS = ("cli",)
"""The stub speaks Ollama's HTTP API; of contreact it imports only `text`, and only faces
(the demo, `contreact stub`) import it."""

ROOT_MODULES = {"__init__.py", "__main__.py", "errors.py", "version.py", "config"}
"""What the package root holds besides its packages."""

MAX_LINES = 500


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


def test_no_import_cycles_counting_package_inits_and_imports_inside_functions() -> None:
    assert cycles(graph()) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def area(module: str) -> str:
    """The layer a module belongs to (`LAYERS`), or `stub`."""
    parts = module.split(".")
    if len(parts) == 1:
        return "contreact"
    if parts[1:3] == ["graph", "state"]:
        return "graph.state"
    return parts[1]


RANK = {name: rank for rank, names in enumerate(LAYERS) for name in names}


def test_every_import_points_down_the_layers() -> None:
    broken = []
    for path in product_files():
        source = area(module_name(path))
        for line, name in imports_of(path):
            target = area(name)
            where = f"{path.relative_to(ROOT)}:{line}: imports {name}"
            if source == "stub":
                if target not in ("stub", "text"):
                    broken.append(where)
            elif target == "stub":
                if source not in STUB_USERS:
                    broken.append(where)
            elif source not in RANK or target not in RANK:
                broken.append(f"{where} (a package missing from LAYERS)")
            elif source != target and RANK[target] >= RANK[source]:
                broken.append(where)
    assert broken == []


def test_the_layer_check_refuses_an_upward_import() -> None:
    assert RANK["nodes"] < RANK["engine"] < RANK["cli"]
    assert RANK["graph.state"] < RANK["nodes"] < RANK["graph"]


FRONT_DOOR = "contreact.checkpoints.persistence"
"""The one module of `checkpoints` the nodes import: the contract of what they ask of storage."""


def back_doors(module: str, imported: list[str]) -> list[str]:
    """The modules of `checkpoints` other than the front door that `module` imports, if a node."""
    if area(module) != "nodes":
        return []
    return [name for name in imported if area(name) == "checkpoints" and name != FRONT_DOOR]


def test_the_nodes_reach_storage_only_through_the_front_door() -> None:
    broken = [
        f"{path.relative_to(ROOT)}:{line}: imports {name}"
        for path in product_files()
        for line, name in imports_of(path)
        if back_doors(module_name(path), [name])
    ]
    assert broken == []
    # The walk sees the nodes' own imports of it, the names it re-exports included.
    seen = graph()
    assert all(FRONT_DOOR in seen[f"contreact.nodes.{n}"] for n in ("step", "reflect", "parse"))


def test_the_front_door_check_refuses_any_other_checkpoints_module() -> None:
    node, others = "contreact.nodes.reflect", ["contreact.checkpoints.journal"]
    assert back_doors(node, others) == others
    assert back_doors(node, [f"{FRONT_DOOR}.sql", "contreact.checkpoints"]) == [
        f"{FRONT_DOOR}.sql",
        "contreact.checkpoints",
    ]
    assert back_doors(node, [FRONT_DOOR, "contreact.tools.memory"]) == []
    assert back_doors("contreact.engine.runner", others) == []


def test_services_never_import_or_run_the_command_line() -> None:
    services = [p for p in product_files() if area(module_name(p)) in ("engine", "studies")]
    assert services
    for path in services:
        text = path.read_text(encoding="utf-8")
        assert not any(name.startswith("contreact.cli") for _, name in imports_of(path)), path
        assert '"-m", "contreact"' not in text and "contreact.cli" not in text, path


def test_the_package_root_holds_only_the_front_door_config_errors_and_a_version() -> None:
    loose = {
        p.name
        for p in PACKAGE.iterdir()
        if not p.name.startswith((".", "__pycache__"))
        and not (p.is_dir() and (p / "__init__.py").is_file() and p.name != "config")
        and p.name != "data"
    }
    assert loose == ROOT_MODULES


def test_no_module_is_over_500_lines() -> None:
    long = {
        str(p.relative_to(ROOT)): n
        for p in product_files()
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}


def _documented_layers() -> list[tuple[str, ...]]:
    """The layers table of docs/architecture.md, bottom first."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    rows = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0].isdigit():
            rows.append((int(cells[0]), tuple(n.strip("` ") for n in cells[1].split(","))))
    return [names for _, names in sorted(rows)]


def test_docs_architecture_lists_the_layers_the_code_holds() -> None:
    assert _documented_layers() == LAYERS
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    listed = {name.split(".")[0] for names in LAYERS for name in names} | {"stub"}
    assert packages - listed == set()
