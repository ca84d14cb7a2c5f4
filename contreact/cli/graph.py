"""`contreact graph`: draw the agent's state machine without starting Studio or the network.

Researchers cite the graph in papers and check it after changing the wiring; Studio shows
it too, but needs a server. Every format is drawn from the compiled graph itself (never a
hand-kept picture), and offline: PNG through pygraphviz (it bundles graphviz), never the
mermaid.ink web service LangChain falls back to.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from langchain_core.runnables.graph import Graph

from contreact.cli.app import BadInputError, command, out

DEFAULT_PNG = Path("graph.png")
START, END = "__start__", "__end__"


class GraphFormat(StrEnum):
    """What `contreact graph` can draw."""

    mermaid = "mermaid"
    ascii = "ascii"
    png = "png"


def _label(node: str) -> str:
    return {START: "START", END: "END"}.get(node, node)


def plain_ascii(drawable: Graph) -> str:
    """A dependency-free text drawing: every node with its outgoing edges.

    Args:
        drawable: The graph (`graph.get_graph()`).

    Returns:
        The drawing, `-->` for fixed edges and `-.->` for a router's choices.
    """
    lines: list[str] = []
    for node in drawable.nodes:
        outgoing = [e for e in drawable.edges if e.source == node]
        if not outgoing:
            continue
        lines.append(f"[{_label(node)}]")
        for edge in outgoing:
            arrow = "-.->" if edge.conditional else "-->"
            label = f" ({edge.data})" if edge.data else ""
            lines.append(f"    {arrow} {_label(edge.target)}{label}")
    lines += ["", "-->  always    -.->  chosen by a router (conditional edge)"]
    return "\n".join(lines) + "\n"


def draw_ascii(drawable: Graph) -> str:
    """The grandalf drawing when grandalf is installed, else `plain_ascii`.

    Args:
        drawable: The graph (`graph.get_graph()`).

    Returns:
        The drawing, newline-terminated.
    """
    try:
        text = drawable.draw_ascii()
    except ImportError:
        # grandalf is an optional LangChain extra; not worth a dependency for a text picture.
        return plain_ascii(drawable)
    return text if text.endswith("\n") else text + "\n"


@contextmanager
def _quiet_fontconfig() -> Iterator[None]:
    """Drop fontconfig's warnings about the system's font config, keep any other stderr.

    The fontconfig bundled with pygraphviz is older than many systems' configuration files
    and warns about them on every render, from C, straight to file descriptor 2.
    """
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            for line in captured.read().decode(errors="replace").splitlines():
                if line.strip() and not line.startswith("Fontconfig warning"):
                    print(line, file=sys.stderr)


def render_png(render: Callable[[], bytes]) -> bytes:
    """Run a PNG renderer offline and return the image.

    Args:
        render: `graph.get_graph().draw_png` (pygraphviz).

    Returns:
        The PNG bytes.

    Raises:
        BadInputError: pygraphviz is missing (it is a dependency; the install is broken).
    """
    try:
        with _quiet_fontconfig():
            image = render()
    except ImportError as exc:
        raise BadInputError(
            f"PNG needs pygraphviz ({exc}); reinstall contreact: pip install -e ."
        ) from None
    if not image:
        raise RuntimeError("graphviz returned no image")
    return image


def _write(path: Path, data: bytes) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    except OSError as exc:
        raise BadInputError(f"cannot write {path}: {exc.strerror or exc}") from None


@command(name="graph", touches_runs=False)
def graph_command(
    fmt: Annotated[
        GraphFormat, typer.Option("--format", "-f", help="mermaid (text), ascii or png.")
    ] = GraphFormat.mermaid,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output", "-o", help="Write to FILE (png default: graph.png) and print its path."
        ),
    ] = None,
) -> None:
    """Draw the agent's graph: five nodes, their edges and the routers' choices."""
    # Imported here: compiling the graph is the command's work, not the CLI's start-up.
    from contreact.graph import graph as agent_graph

    drawable = agent_graph.get_graph()
    if fmt is GraphFormat.png:
        target = output or DEFAULT_PNG
        _write(target, render_png(lambda: drawable.draw_png(None)))
        out.print(str(target.resolve()), markup=False)
        return
    if fmt is GraphFormat.ascii:
        text = draw_ascii(drawable)
    else:
        text = drawable.draw_mermaid()
    if output is None:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        return
    _write(output, text.encode("utf-8"))
    out.print(str(output.resolve()), markup=False)
