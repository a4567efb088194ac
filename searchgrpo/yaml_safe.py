"""YAML read safely and boundedly: `safe_yaml` is `yaml.safe_load` that refuses alias bombs.

A "billion laughs" document nests aliases so that a few hundred bytes expand to billions of values:
PyYAML builds it as a graph that shares its nodes, but anything that walks the result (merging
config overrides, dumping it, validating it) expands it. The node graph is measured before
anything is built, memoised per node (linear in the document's size), and a document that would
expand past `MAX_YAML_NODES` values, or that contains itself, is refused with a `yaml.YAMLError`.
"""

from __future__ import annotations

import math
from typing import Any

import yaml

MAX_YAML_NODES = 10_000
"""Most values a document may expand to once its aliases are resolved (a config has a few hundred)."""


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader that refuses documents whose aliases expand past MAX_YAML_NODES values
    (they are counted on the composed node graph, before anything is built)."""

    def construct_document(self, node: Any) -> Any:
        if _expanded_size(node) > MAX_YAML_NODES:
            raise yaml.YAMLError(
                f"aliases expand to more than {MAX_YAML_NODES} values (a 'billion laughs' document?); refused"
            )
        return super().construct_document(node)


def _expanded_size(root: Any) -> float:
    """Values in the document once every alias is expanded (memoised per node: linear time; a node
    that contains itself counts as infinite)."""
    sizes: dict[int, float] = {}
    stack: list[tuple[Any, bool]] = [(root, False)]
    open_nodes: set[int] = set()
    while stack:
        node, children_done = stack.pop()
        if id(node) in sizes:
            continue
        if isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        elif isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        else:
            sizes[id(node)] = 1
            continue
        if children_done:
            open_nodes.discard(id(node))
            sizes[id(node)] = 1 + sum(sizes[id(c)] for c in children)
            continue
        if id(node) in open_nodes:
            return math.inf  # a recursive alias
        open_nodes.add(id(node))
        stack.append((node, True))
        for child in children:
            if id(child) in open_nodes:
                return math.inf
            if id(child) not in sizes:
                stack.append((child, False))
    return sizes[id(root)]


def safe_yaml(text: str) -> Any:
    """`yaml.safe_load(text)` that refuses alias bombs (raises yaml.YAMLError)."""
    loader = _BoundedLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()
