"""A topology file parsed into plain data, with the line every key path came from.

PyYAML's `safe_load` throws the line numbers away; composing the node graph
first keeps them, so every later error can say `file:line: key.path: ...`.
This module is the only place that touches YAML.

The files are written by hand, but also downloaded, generated and fuzzed,
so reading one is bounded (adr/0014): a file above `MAX_BYTES` is refused
by its size before it is parsed (`read_bounded`), the composer counts the values the
document would expand to, aliases included, and stops at `MAX_VALUES` — a
"billion laughs" alias bomb is one error at the line where it crosses the
bound, in milliseconds and a few megabytes, instead of gigabytes of copies.
Numbers beyond what 64-bit arithmetic holds are refused before anything
converts them, so no later `float()` can overflow.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import yaml
from yaml.events import AliasEvent
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from kernbench.topology.errors import TopologyError

KeyPath = tuple[str | int, ...]

# A topology or ccl file holds about a hundred values; a thousand times that
# is still read in a fraction of a second, and nothing legitimate comes near.
MAX_VALUES = 100_000
# The same files are a few kilobytes (a sweep listing its points, a few hundred). PyYAML reads about 2 MB a
# second, so a file of 100 MB would take it minutes; one above this many bytes is refused by its size.
MAX_BYTES = 4 << 20
# The largest magnitude a number may have: what an int64 holds. Normalized
# values are at most a unit factor (10^9) above it, and their products stay
# far inside a float's range.
LARGEST_NUMBER = 2**63 - 1

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


class _TooManyValues(Exception):
    """Raised by `_BoundedLoader` when the document would expand past `MAX_VALUES` values."""

    def __init__(self, mark, problem: str):
        super().__init__(problem)
        self.mark = mark
        self.problem = problem


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's SafeLoader, composing with a budget of `MAX_VALUES` values.

    Composing keeps an alias as a second reference to its anchor's node, so
    the node graph stays as small as the text; it is turning the graph into
    plain data that copies each reference. Each node's expanded size (itself
    plus its children's expanded sizes, an alias counting as the whole node
    it names) is known once the node is composed, so a bomb is refused at the
    first node whose expansion crosses the budget, before anything is copied.
    Composed nodes are counted as they start too, so a file that is simply
    huge stops early rather than after it is all in memory.
    """

    def __init__(self, text: str):
        super().__init__(text)
        self._expanded: dict[int, int] = {}  # id(node) -> values it expands to; nodes live as long as the loader
        self._composed = 0

    def compose_node(self, parent, index):
        if self.check_event(AliasEvent):
            return super().compose_node(parent, index)  # its node is already counted (or open: a recursion)
        self._composed += 1
        if self._composed > MAX_VALUES:
            raise _TooManyValues(self.peek_event().start_mark,
                                 f"the file holds more than {MAX_VALUES:,} values; expected a configuration "
                                 "(a few hundred)")
        node = super().compose_node(parent, index)
        if isinstance(node, ScalarNode):
            size = 1
        elif isinstance(node, SequenceNode):
            size = 1 + sum(self._expanded.get(id(item), 1) for item in node.value)
        else:
            size = 1 + sum(self._expanded.get(id(key), 1) + self._expanded.get(id(value), 1)
                           for key, value in node.value)
        self._expanded[id(node)] = size
        if size > MAX_VALUES:
            raise _TooManyValues(node.start_mark,
                                 f"aliases expand this value to {size:,} values, above the limit of {MAX_VALUES:,}; "
                                 "expected plain data (is it an alias bomb?)")
        return node


def read_bounded(path) -> bytes:
    """The bytes of the YAML file at `path`; above `MAX_BYTES` one `TopologyError` naming it, read no further (a
    device such as /dev/zero never ends). Errors of the file system are the caller's to word."""
    with open(path, "rb") as file:
        data = file.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise TopologyError(f"{path}: the file is larger than {MAX_BYTES >> 20} MiB, the most a YAML file may hold "
                            "here; expected a configuration of a few kilobytes")
    return data


def parse_document(text: str, source: str) -> Document:
    """Parse YAML text into a `Document`; any syntax problem is one `TopologyError` at its own line.

    So is a document that expands past `MAX_VALUES` values, and a number
    whose magnitude is above `LARGEST_NUMBER`.

    PyYAML's pure-Python reader takes milliseconds for a shipped file, and
    every `Session` reads a topology and a ccl.yaml: a process building
    many (a test suite, a sweep, a probe) would spend more time reading
    YAML than simulating. So the data of the last `PARSED_KEPT` texts read
    (told apart by source and text) is kept, and each caller gets a copy of
    its own to change; a text that fails is read, and fails, every time.
    Kept per process, not per run (`kernbench.run_caches`): what is kept is a
    pure function of the text, and no caller can change it.
    """
    kept = _parsed.get((source, text))
    if kept is None:
        kept = _parse(text, source)
        if len(_parsed) >= PARSED_KEPT:
            del _parsed[next(iter(_parsed))]  # the oldest
        _parsed[source, text] = kept
    data, lines = kept
    return Document(source, copy.deepcopy(data), lines)


PARSED_KEPT = 64
_parsed: dict[tuple[str, str], tuple[Any, Mapping[KeyPath, int]]] = {}


def _parse(text: str, source: str) -> tuple[Any, Mapping[KeyPath, int]]:
    """`parse_document`'s reading itself: the plain data and the (read-only) line of each key path."""
    try:
        # The reader checks for unprintable characters already in the constructor.
        loader = _BoundedLoader(text)
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
    except _TooManyValues as error:
        raise TopologyError(f"{source}:{error.mark.line + 1}: {error.problem}") from None
    except RecursionError:
        # PyYAML composes recursively; thousands of nested brackets exhaust the stack.
        raise TopologyError(f"{source}: YAML syntax error: nested too deeply; expected a topology mapping") from None
    return data, MappingProxyType(lines)


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
            value = loader.construct_object(node, deep=True)
        except (yaml.YAMLError, ValueError, OverflowError) as error:
            raise fail(node, f"cannot read the value {_shortened(node.value)!r}: "
                             f"{getattr(error, 'problem', error)}") from None
        if _is_number(value) and math.isfinite(value) and abs(value) > LARGEST_NUMBER:
            raise fail(node, f"found {_shortened(node.value)}; expected a number of magnitude at most 2^63-1 "
                             "(about 9.2e18), what 64-bit arithmetic holds")
        return value
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


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _shortened(text: str, limit: int = 40) -> str:
    """The source text of a value, cut to fit a one-line message."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"
