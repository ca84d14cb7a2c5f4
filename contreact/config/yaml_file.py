"""Reading YAML a person wrote: one document, whose aliases cannot blow it up.

YAML's aliases let a few lines stand for a huge value (`&a [x, x]`, `&b [*a, *a]`, ...: the
"billion laughs"). PyYAML builds such a value cheaply, sharing each aliased part, but
whatever walks it afterwards (validating a `reflection.schema`, storing the config as
JSON) walks every copy. So the document is measured before it is built: the values it
stands for, each alias counted as the whole value it repeats, at every depth of the
document, not only at its top. A document over the limit, or one that contains itself, is
refused in one line before anything reads it.
"""

from __future__ import annotations

from typing import Any

import yaml

MAX_VALUES = 100_000
"""The most values (mappings, lists, keys and scalars, aliases expanded) a config may stand
for: far above any real config, far below what makes validating or storing it slow."""


class YamlError(ValueError):
    """A YAML text that cannot be used; the message is one line."""


def read_yaml(text: str, source: str, limit: int = MAX_VALUES) -> Any:
    """The one document of `text` (None when empty), refused if its aliases stand for too much.

    Raises:
        YamlError: naming `source` and the problem (a line number where YAML gives one).
    """
    loader = yaml.SafeLoader(text)
    try:
        try:
            node = loader.get_single_node()
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" line {mark.line + 1}" if mark is not None else ""
            problem = getattr(exc, "problem", None) or "unreadable"
            raise YamlError(f"{source}:{where} is not valid YAML: {problem}") from None
        except RecursionError:
            raise YamlError(f"{source} is not valid YAML: it is nested too deeply") from None
        if node is None:
            return None
        _measure(node, source, limit)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _measure(root: yaml.Node, source: str, limit: int) -> int:
    """How many values `root` stands for, aliases expanded; raises past `limit` or on a loop.

    Each node's size is computed once (an alias is the same node object again), so the
    measuring itself stays as small as the text.
    """
    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if key in sizes:
            continue
        parts = _children(node)
        if not children_done:
            on_path.add(key)
            stack.append((node, True))
            for child in parts:
                if id(child) in on_path:
                    raise YamlError(f"{source}: a YAML alias refers to a value that contains it")
                if id(child) not in sizes:
                    stack.append((child, False))
            continue
        on_path.discard(key)
        size = 1 + sum(sizes[id(child)] for child in parts)
        if size > limit:
            line = node.start_mark.line + 1 if node.start_mark is not None else 0
            raise YamlError(
                f"{source}: line {line}: its YAML aliases stand for more than {limit:,} values; "
                "write the values out (aliases that repeat aliases multiply)"
            )
        sizes[key] = size
    return sizes[id(root)]


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []
