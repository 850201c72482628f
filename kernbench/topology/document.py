"""A topology file parsed into plain data, with the line every key path came from.

PyYAML's `safe_load` throws the line numbers away; composing the node graph
first keeps them, so every later error can say `file:line: key.path: ...`.
This module is the only place that touches YAML.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from kernbench.topology.errors import TopologyError

KeyPath = tuple[str | int, ...]

# Collections are built here rather than by PyYAML's constructor, so any other
# tag (`!!set`, `!!python/object`, a custom one) would be silently dropped.
_PLAIN_COLLECTION_TAGS = ("tag:yaml.org,2002:map", "tag:yaml.org,2002:seq")


def dotted(path: KeyPath) -> str:
    """`cube.pe_layout.corners[2]`: the key path as a user would type it."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text or "(top level)"


@dataclass(frozen=True, slots=True)
class Document:
    """Plain data of one YAML file plus the 1-based line of each key path in it."""

    source: str
    data: Any
    lines: Mapping[KeyPath, int]

    def line_of(self, path: KeyPath) -> int:
        """The line of `path`, or of its nearest ancestor in the file (a missing key is reported at its parent)."""
        while path not in self.lines:
            path = path[:-1]
        return self.lines[path]

    def error(self, path: KeyPath, problem: str) -> TopologyError:
        return TopologyError(f"{self.source}:{self.line_of(path)}: {dotted(path)}: {problem}")


def parse_document(text: str, source: str) -> Document:
    """Parse YAML text into a `Document`; any syntax problem is one `TopologyError` at its own line."""
    try:
        # The reader checks for unprintable characters already in the constructor.
        loader = yaml.SafeLoader(text)
        try:
            root = loader.get_single_node()
            if root is None:
                raise TopologyError(f"{source}: the file is empty; expected a topology mapping")
            lines: dict[KeyPath, int] = {(): root.start_mark.line + 1}
            data = _plain(root, (), lines, loader, source, set())
        finally:
            loader.dispose()
    except yaml.YAMLError as error:
        raise TopologyError(_syntax_message(error, text, source)) from None
    except RecursionError:
        # PyYAML composes recursively; thousands of nested brackets exhaust the stack.
        raise TopologyError(f"{source}: YAML syntax error: nested too deeply; expected a topology mapping") from None
    return Document(source, data, lines)


def _syntax_message(error: yaml.YAMLError, text: str, source: str) -> str:
    """One line: `file:line: YAML syntax error: what`, from whichever stage of PyYAML complained."""
    if isinstance(error, yaml.reader.ReaderError):
        line = text.count("\n", 0, error.position) + 1
        code = error.character if isinstance(error.character, int) else ord(error.character)
        return f"{source}:{line}: YAML syntax error: {error.reason} (character #x{code:04x})"
    mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
    where = f"{source}:{mark.line + 1}" if mark is not None else source
    problem = getattr(error, "problem", None) or str(error)
    context = getattr(error, "context", None)
    detail = f"{context}, {problem}" if context else problem
    return f"{where}: YAML syntax error: {detail}"


def _plain(node: Node, path: KeyPath, lines: dict, loader: yaml.SafeLoader, source: str, open_nodes: set) -> Any:
    """Turn a node graph into dicts, lists and scalars, recording each key's line on the way."""

    def fail(at: Node, problem: str, at_path: KeyPath = path) -> TopologyError:
        return TopologyError(f"{source}:{at.start_mark.line + 1}: {dotted(at_path)}: {problem}")

    if id(node) in open_nodes:
        raise fail(node, "an alias refers to a node that contains it; expected plain (non-recursive) data")
    if isinstance(node, ScalarNode):
        try:
            return loader.construct_object(node, deep=True)
        except (yaml.YAMLError, ValueError, OverflowError) as error:
            raise fail(node, f"cannot read the value {node.value!r}: {getattr(error, 'problem', error)}") from None
    if node.tag not in _PLAIN_COLLECTION_TAGS:
        raise fail(node, f"found the tag {node.tag!r}; expected a plain mapping or list")
    open_nodes.add(id(node))
    try:
        if isinstance(node, SequenceNode):
            items = []
            for index, item in enumerate(node.value):
                lines[path + (index,)] = item.start_mark.line + 1
                items.append(_plain(item, path + (index,), lines, loader, source, open_nodes))
            return items
        assert isinstance(node, MappingNode)
        loader.flatten_mapping(node)
        mapping: dict[str, Any] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, ScalarNode):
                raise fail(key_node, "found a list or mapping used as a key; expected a plain key name")
            # The key's source text, not its YAML 1.1 value: `no:` stays the name "no", not False.
            key = key_node.value
            if key in mapping:
                raise fail(
                    key_node,
                    f"the key appears twice (first on line {lines[path + (key,)]}); expected it once",
                    path + (key,),
                )
            lines[path + (key,)] = key_node.start_mark.line + 1
            mapping[key] = _plain(value_node, path + (key,), lines, loader, source, open_nodes)
        return mapping
    finally:
        open_nodes.discard(id(node))
