"""The stub speaks HTTP and imports nothing of the graph; the GGUF backend loads only on request.

The stub shares two things with the graph's nodes, the token estimate and the markup of
text-tool mode, through the leaf package `contreact.text`, which imports nothing of
contreact. Its real-model backend (`stub/real.py`, `stub/chat_templates.py`, llama.cpp)
is imported only when a real model is asked for, so `import contreact.stub`,
`contreact stub` and `contreact demo` work without the `real` extra.
"""

from __future__ import annotations

import ast
import os
import signal
import subprocess
import sys
from pathlib import Path

from contreact.nodes.prompts import TEXT_TOOLS_INTRO, text_tools_section
from contreact.stub import ChatRequest
from contreact.text.tool_text import (
    listed_tools,
    tool_call_text,
    tool_line,
    tool_response_text,
    written_calls,
)
from contreact.tools.registry import TOOL_SCHEMAS

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "contreact"
GGUF_BACKEND = (
    "contreact.stub.real",
    "contreact.stub.chat_templates",
    "contreact.stub.grammars",
    "llama_cpp",
)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_only(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")
    )


def imports_of(path: Path) -> set[str]:
    """Every module `path` imports when it runs, at the top or inside a function."""
    found: set[str] = set()
    package = _module_name(path) if path.name == "__init__.py" else _module_name(path.parent)

    def visit(node: ast.AST) -> None:
        if _type_checking_only(node):
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: the package, one level up per extra dot
                parts = package.split(".")
                anchor = ".".join(parts[: len(parts) - node.level + 1])
                base = f"{anchor}.{base}" if base else anchor
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return found


def test_the_text_helpers_the_stub_uses_import_only_the_standard_library() -> None:
    # The stub must start light: each `contreact.text` module it reaches imports only the
    # standard library (other text helpers, such as the numpy-based similarity, are free
    # to use what they need, since the stub never loads them).
    used = {
        module
        for path in sorted((PACKAGE / "stub").glob("*.py"))
        for module in imports_of(path)
        if module.startswith("contreact.text")
    }
    assert used
    files = [ROOT.joinpath(*m.split(".")).with_suffix(".py") for m in sorted(used)]
    files = [f for f in files if f.is_file()]  # `from contreact.text.x import name` adds x.name
    assert files
    for path in files:
        module = _module_name(path)
        for imported in imports_of(path):
            top = imported.split(".")[0]
            assert top == "__future__" or top in sys.stdlib_module_names, (module, imported)


def test_the_stub_imports_only_itself_and_the_text_helpers() -> None:
    for path in sorted((PACKAGE / "stub").glob("*.py")):
        for module in imports_of(path):
            if module.split(".")[0] == "contreact":
                assert module.startswith(("contreact.stub", "contreact.text")), (path.name, module)


def test_the_stub_has_no_import_loop() -> None:
    files = {_module_name(p): p for p in sorted((PACKAGE / "stub").glob("*.py"))}
    edges = {
        name: {m for m in imports_of(path) if m in files and m != name}
        for name, path in files.items()
    }
    done: set[str] = set()

    def walk(name: str, trail: tuple[str, ...]) -> None:
        assert name not in trail, " -> ".join((*trail, name))
        if name in done:
            return
        for target in sorted(edges[name]):
            walk(target, (*trail, name))
        done.add(name)

    for name in sorted(files):
        walk(name, ())


def _loaded_by(code: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return set(done.stdout.split())


def test_importing_the_stub_loads_neither_the_gguf_backend_nor_the_graph() -> None:
    loaded = _loaded_by("import sys, contreact.stub; print(*sys.modules)")
    assert "contreact.stub.server" in loaded
    assert not loaded & set(GGUF_BACKEND)
    heavy = ("contreact.nodes", "contreact.graph", "langchain_core", "langgraph", "sqlalchemy")
    assert not {m for m in loaded if m.startswith(heavy)}


# Run a command as `python -m MODULE ARGS` and say at exit which GGUF modules it loaded.
_WATCHED = """
import atexit, runpy, sys
atexit.register(lambda: print("GGUF", *sorted(m for m in sys.modules if m in {gguf!r})))
sys.argv = [{module!r}, *{args!r}]
runpy.run_module({module!r}, run_name="__main__", alter_sys=True)
"""


def _watched(module: str, *args: str) -> list[str]:
    return [
        sys.executable,
        "-c",
        _WATCHED.format(gguf=set(GGUF_BACKEND), module=module, args=list(args)),
    ]


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CONTREACT_DB_URL", "OLLAMA_HOST")}
    return {**env, "CONTREACT_HOME": str(tmp_path), "PYTHONUNBUFFERED": "1"}


def _gguf_line(stdout: str) -> str:
    return next(line for line in stdout.splitlines() if line.startswith("GGUF"))


def test_contreact_demo_runs_without_the_gguf_backend(tmp_path: Path) -> None:
    done = subprocess.run(
        _watched("contreact", "demo", "--cycles", "1", "--quiet"),
        cwd=ROOT,
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert _gguf_line(done.stdout) == "GGUF"


def _serve_and_stop(command: list[str], tmp_path: Path) -> str:
    proc = subprocess.Popen(
        command, cwd=ROOT, env=_env(tmp_path), stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("STUB READY"):
                break
        assert lines and lines[-1].startswith("STUB READY"), lines
        proc.send_signal(signal.SIGTERM)
        rest, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0
    return rest


def test_contreact_stub_serves_without_the_gguf_backend(tmp_path: Path) -> None:
    rest = _serve_and_stop(_watched("contreact", "stub", "--port", "0"), tmp_path)
    assert _gguf_line(rest) == "GGUF"


def test_python_m_contreact_stub_serves_without_the_gguf_backend(tmp_path: Path) -> None:
    rest = _serve_and_stop(_watched("contreact.stub", "--port", "0"), tmp_path)
    assert _gguf_line(rest) == "GGUF"


# ---------------------------------------------------------------- the text-tool markup


def test_a_written_call_reads_back_as_written() -> None:
    text = tool_call_text("write", {"key": "k", "value": "v"})
    assert (
        text == '<tool_call>{"name": "write", "arguments": {"key": "k", "value": "v"}}</tool_call>'
    )
    assert written_calls(f"first {text} then {tool_call_text('list', {})}") == [
        {"name": "write", "arguments": {"key": "k", "value": "v"}},
        {"name": "list", "arguments": {}},
    ]


def test_blocks_that_are_not_calls_are_skipped() -> None:
    text = (
        '<tool_call>{"name": "write", "arguments": {"key": </tool_call>'
        '<tool_call>{"arguments": {}}</tool_call>'
        '<tool_call>{"name": "read", "arguments": "k"}</tool_call>'
    )
    assert written_calls(text) == [{"name": "read", "arguments": {}}]


def test_the_stub_reads_the_tools_the_text_tool_prompt_lists() -> None:
    system = "You are an agent.\n\n" + text_tools_section(TOOL_SCHEMAS)
    names = [schema["function"]["name"] for schema in TOOL_SCHEMAS]
    assert listed_tools(system) == names
    request = ChatRequest(model="m", messages=[{"role": "system", "content": system}])
    assert request.text_tool_names == names and request.tools_offered
    assert listed_tools("- write(key): a tool line without the example call") == []
    assert tool_call_text("write", {"key": "first-note", "value": "what I want to remember"}) in (
        TEXT_TOOLS_INTRO
    )


def test_tool_lines_and_responses() -> None:
    assert tool_line("read", '"key": string', "Read a memory.") == (
        '- read("key": string): Read a memory.'
    )
    assert tool_response_text("list", "[]") == '<tool_response name="list">\n[]\n</tool_response>'
