"""YAML read safely and boundedly: `safe_yaml` is `yaml.safe_load` that refuses alias bombs.

A "billion laughs" document nests aliases so that a few hundred bytes expand to billions of values:
PyYAML builds it as a graph that shares its nodes, but anything that walks the result (merging
config overrides, dumping it, validating it) expands it. The node graph is measured before
anything is built, memoised per node (linear in the document's size), and a document that would
expand past `MAX_YAML_NODES` values, or that contains itself, is refused with a `RefusedYAML`
(a `yaml.YAMLError`).

It also reads what is written, where YAML 1.1 (PyYAML's) reads something else:

- a key written twice in one mapping (a pasted second `train:` section) is refused naming both
  lines, instead of the last silently replacing the first;
- numbers are decimal as written: `010` is 10 (not octal 8), and `1:30` (sexagesimal 90),
  `0x10` (hex), `1_000` and dates such as `2024-01-01` stay strings, which a number key refuses
  (`1e-5`, without a dot, stays a string as in YAML 1.1: the config reads it as the number it spells);
- an integer of more than `MAX_INT_DIGITS` digits is a YAML error naming its line, not a
  ValueError from Python's limit on converting long integers.
"""

from __future__ import annotations

import math
import re
from typing import Any, ClassVar

import yaml

MAX_INT_DIGITS = 4300
"""Most digits of an integer read (Python's own default limit on int/str conversion)."""
_INT = re.compile(r"^[-+]?[0-9]+$")
_FLOAT = re.compile(
    r"^[-+]?(\.[0-9]+|[0-9]+\.[0-9]*)([eE][-+]?[0-9]+)?$"
    r"|^[-+]?\.(inf|Inf|INF)$|^\.(nan|NaN|NAN)$"
)
_YAML_11_NUMBER_TAGS = ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float", "tag:yaml.org,2002:timestamp")


class RefusedYAML(yaml.YAMLError):
    """YAML that parses but is refused: aliases that expand too far, a key written twice, an
    integer too long to read. Callers that fall back to reading a value as plain text (`--set`) do
    not fall back on these."""


class DuplicateKeyError(RefusedYAML):
    """A mapping holds one key twice; the message names it and both lines."""


MAX_YAML_NODES = 10_000
"""Most values a document may expand to once its aliases are resolved (a config has a few hundred)."""


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader that refuses documents whose aliases expand past MAX_YAML_NODES values
    (they are counted on the composed node graph, before anything is built), refuses keys written
    twice, and reads numbers as written (see the module docstring)."""

    # types-PyYAML declares BaseResolver's class attribute yaml_implicit_resolvers an instance variable.
    yaml_implicit_resolvers: ClassVar[dict[Any, list[tuple[str, re.Pattern[str]]]]] = {  # type: ignore[misc]
        first: [(tag, regexp) for tag, regexp in resolvers if tag not in _YAML_11_NUMBER_TAGS]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }

    def construct_document(self, node: Any) -> Any:
        if _expanded_size(node) > MAX_YAML_NODES:
            raise RefusedYAML(
                f"aliases expand to more than {MAX_YAML_NODES} values (a 'billion laughs' document?); refused"
            )
        return super().construct_document(node)

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):  # the keys written here (what `<<` merges in may be overridden)
            first_line: dict[Any, int] = {}
            for key_node, _ in node.value:
                if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node)
                line = key_node.start_mark.line + 1
                if key in first_line:
                    raise DuplicateKeyError(
                        f"line {line}: key {key!r} is written twice (first at line {first_line[key]}); "
                        "keep one: the second would silently replace the first"
                    )
                first_line[key] = line
        return super().construct_mapping(node, deep=deep)


def _construct_int(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int:
    text = str(loader.construct_scalar(node))
    digits = text.lstrip("+-")
    if len(digits) > MAX_INT_DIGITS:
        raise RefusedYAML(
            f"line {node.start_mark.line + 1}: an integer of {len(digits)} digits (at most {MAX_INT_DIGITS} are read)"
        )
    return int(text, 10)


def _construct_float(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> float:
    text = str(loader.construct_scalar(node)).lower()
    if text.lstrip("+-") == ".inf":
        return -math.inf if text.startswith("-") else math.inf
    if text == ".nan":
        return math.nan
    return float(text)


_BoundedLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)
_BoundedLoader.add_constructor("tag:yaml.org,2002:float", _construct_float)
_BoundedLoader.add_implicit_resolver("tag:yaml.org,2002:int", _INT, list("-+0123456789"))
_BoundedLoader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT, list("-+0123456789."))


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
