"""Every one-line error the CLI can print, collected from the code that says it.

The CLI prints an error in one line (`contreact: ...`) from a handful of places: `fail`
calls, `explain`'s table of known errors, and the messages of the errors those turn into a
line (a bad config, bad input, a storage fault, a failed model call, a run's failure
reason). This module walks the package's syntax trees and collects each such message
where it is written, as its template: the literal text, with each value it inserts shown
as `{the expression}`. `tests/unit/test_error_catalogue.py` renders them to
docs/errors.md and keeps that page equal to the code, so it cannot go stale.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from support.paths import ROOT

PACKAGE = ROOT / "contreact"
DOC = ROOT / "docs" / "errors.md"

LINE_ERRORS: dict[str, str] = {
    "BadInputError": "2",
    "ConfigError": "2",
    "AnalysisInputError": "2",
    "OperatorUnavailableError": "2",
    "StorageFault": "1",
    "RunStoppedByStorage": "1",
    "ModelCallError": "1",
    "EvaluatorError": "1",
    "ForeignThreadError": "1",
    "RegisteredRunError": "1",
    "MissingExtraError": "2",
    "BindError": "2",
    "ListenError": "2",
    "ExtensionError": "2",
    "YamlError": "2",
    "StorageNotFoundError": "2",
}
"""Errors whose message the CLI prints as the line, and the exit code it goes with."""

VALUE_ERROR_MODULES: dict[str, str] = {
    "contreact/config/__init__.py": "2",
    "contreact/config/sections.py": "2",
    "contreact/config/extensions.py": "2",
    "contreact/ollama/hosts.py": "2",
    "contreact/checkpoints/run_record.py": "2",
    "contreact/checkpoints/storage.py": "2",
    "contreact/engine/runner.py": "2",
}
"""Modules whose `ValueError`s reach the CLI as bad input (a config field, a run id, a URL)."""

LINE_FUNCTIONS: dict[str, str] = {
    "describe_error": "2",
    "_sqlite_cause": "1",
    "missing_file_line": "2",
    "no_tables_line": "2",
}
"""Functions whose returned text is (part of) a line: a config problem, a SQLite fault."""

STUB_LINES = (
    "contreact/stub/agents.py",
    "contreact/stub/faults.py",
    "contreact/stub/grammars.py",
    "contreact/stub/real.py",
    "contreact/stub/scenarios.py",
)
"""`contreact stub` prints the `ValueError` of a bad scenario or fault, or a missing extra,
as `stub: LINE`; the rest of the stub answers HTTP clients, not people at the CLI."""


@dataclass(frozen=True)
class Site:
    """One message the CLI can print: where it is written, its exit code, its template."""

    where: str
    exit_code: str
    template: str


def template(node: ast.expr) -> str:
    """A message expression as text: literals as written, inserted values as `{expr}`."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(template(part) for part in node.values)
    if isinstance(node, ast.FormattedValue):
        conversion = {-1: "", 115: "!s", 114: "!r", 97: "!a"}[node.conversion]
        return "{" + ast.unparse(node.value) + conversion + "}"
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return template(node.left) + template(node.right)
    return "{" + ast.unparse(node) + "}"


def _name(func: ast.expr) -> str:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""


class _Collector(ast.NodeVisitor):
    def __init__(self, module: str) -> None:
        self.module = module
        self.scope: list[str] = []
        self.sites: list[Site] = []

    def _add(self, code: str, node: ast.expr) -> None:
        where = f"{self.module}:{'.'.join(self.scope) or '(module)'}"
        self.sites.append(Site(where, code, template(node)))

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self.scope.append(node.name)
        self.generic_visit(node)
        self.scope.pop()

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.scope.append(node.name)
        self.generic_visit(node)
        self.scope.pop()

    def visit_Return(self, node: ast.Return) -> None:
        # `known_error` and `explain`: the table of known errors, (line, exit code) per error.
        value = node.value
        if self.scope[-1:] in (["explain"], ["known_error"]) and isinstance(value, ast.Tuple):
            line, code = value.elts
            self._add(ast.unparse(code), line)
        elif self.scope and self.scope[-1] in LINE_FUNCTIONS and value is not None:
            self._add(LINE_FUNCTIONS[self.scope[-1]], value)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        name = _name(node.func)
        args = [a for a in node.args if not isinstance(a, ast.Starred)]
        if name == "fail" and len(args) == 2:
            self._add(ast.unparse(args[1]), args[0])
        elif name == "finish" and len(args) == 2 and ast.unparse(args[0]) == "'failed'":
            self._add("1", args[1])  # a run's failure: `run RUN failed: {reason}`
        elif name == "ModelCallError" and len(args) >= 2:
            self._add("1", args[1])
        elif name in LINE_ERRORS and args and name != "ModelCallError":
            self._add(LINE_ERRORS[name], args[0])
        elif name == "ValueError" and args and self.module in VALUE_ERROR_MODULES:
            self._add(VALUE_ERROR_MODULES[self.module], args[0])
        elif name in ("ValueError", "MissingExtraError") and args and self.module in STUB_LINES:
            self._add("2", args[0])
        self.generic_visit(node)


def _super_messages(tree: ast.Module, module: str) -> list[Site]:
    """Messages an error class builds in `__init__` (`super().__init__(message)`)."""
    sites = []
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        if cls.name not in LINE_ERRORS:
            continue
        for call in (n for n in ast.walk(cls) if isinstance(n, ast.Call)):
            if _name(call.func) == "__init__" and call.args:
                sites.append(
                    Site(f"{module}:{cls.name}", LINE_ERRORS[cls.name], template(call.args[0]))
                )
    return sites


def collect() -> list[Site]:
    """Every message site in the package, in file order."""
    sites: list[Site] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = path.relative_to(ROOT).as_posix()
        if module.startswith("contreact/stub/") and module not in STUB_LINES:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        collector = _Collector(module)
        collector.visit(tree)
        sites += collector.sites + _super_messages(tree, module)
    return [s for s in sites if not _passes_on(s.template)]


def _passes_on(text: str) -> bool:
    """A site that hands on a line written elsewhere (`{error.message}`, `{cause}`)."""
    return text.startswith("{") and text.endswith("}") and text.count("{") == 1


HEADER = """# Error lines

Every one-line error the `contreact` command can print on stderr, as the code writes it:
`{...}` is a value filled in when it is printed (a run id, a host, a file, a database URL
with its password hidden, the server's own words). Each line is printed as
`contreact: LINE`. A run that fails prints ``contreact: run RUN failed: REASON; once that
is fixed, `contreact resume RUN` continues it``, its reason one of the lines below. Exit
codes: 1 a run or a command failed, 2 bad input or config, 130 interrupted
([commands.md](commands.md)). `contreact stub` prints its own lines (those written in
`contreact/stub/`) as `stub: LINE`.

No line names an internal exception class: `--debug` adds the traceback (and, on each
retried model call, the client's exception class) for a bug report. An input echoed in a
line is cut to its beginning and end when long (a 5,000-character run id shows 80
characters and its length), and a line longer than 1,000 characters is cut the same way.

This page is generated by `tests/unit/test_error_catalogue.py` from the code that prints
the lines (regenerate it with `CONTREACT_WRITE_ERRORS_DOC=1` and that test); the test
fails when the page and the code disagree.

| exit | line | written in |
|---|---|---|
"""


def render(sites: list[Site]) -> str:
    """The catalogue as Markdown."""
    rows = []
    for site in sites:
        line = site.template.replace("|", "\\|").replace("\n", " ")
        rows.append(f"| {site.exit_code} | `` {line} `` | `{site.where}` |")
    return HEADER + "\n".join(rows) + "\n"


def read_doc(path: Path = DOC) -> str:
    """The catalogue page as it is on disk ("" if absent)."""
    return path.read_text(encoding="utf-8") if path.exists() else ""
