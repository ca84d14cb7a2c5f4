"""`contreact graph --format ascii`'s drawing: grandalf's boxes if installed, else plain lines."""

from __future__ import annotations

import pytest
from langchain_core.runnables.graph import Graph

from contreact.cli.graph import draw_ascii, plain_ascii


def _toy_graph() -> Graph:
    drawable = Graph()
    start, a, b, end = (
        drawable.add_node(None, name) for name in ("__start__", "a", "b", "__end__")
    )
    drawable.add_edge(start, a)
    drawable.add_edge(a, b, data="go on", conditional=True)
    drawable.add_edge(a, end, conditional=True)
    return drawable


def test_plain_ascii_marks_conditional_edges_and_labels() -> None:
    text = plain_ascii(_toy_graph())
    assert "[START]\n    --> a\n" in text
    assert "[a]\n    -.-> b (go on)\n    -.-> END\n" in text
    assert "[b]" not in text  # no outgoing edges, nothing to draw


def test_ascii_prefers_grandalf_when_available(monkeypatch: pytest.MonkeyPatch) -> None:
    drawable = _toy_graph()
    monkeypatch.setattr(Graph, "draw_ascii", lambda self: "BOXES")
    assert draw_ascii(drawable) == "BOXES\n"

    def missing(self: Graph) -> str:
        raise ImportError("Install grandalf to draw graphs")

    monkeypatch.setattr(Graph, "draw_ascii", missing)
    assert draw_ascii(drawable) == plain_ascii(drawable)
