"""`ccl.yaml`: which collective algorithm a run uses, with what IPCQ parameters, and the world size.

`load_ccl_config()` returns the current run's configuration (the file given
to `kernbench run --ccl`, else the shipped `ccl/ccl.yaml`) or loads a given
file, whose keys are laid over the shipped file's (a file holds only what it
overrides); `resolve_algorithm_config(cfg)` flattens it into the one dict a
collective runs with: `defaults`, overlaid by the chosen algorithm's entry.
Every mistake in a file — bad YAML, an unknown key or algorithm, a value of
the wrong kind — is one `CclConfigError` naming the file, the line and the
key path, and listing what is valid. Values that depend on the machine (slot
counts against the topology's IPCQ depth) are checked when the process group
is initialized, where the topology is known.

Each algorithm's `module` is imported when the file is loaded (adr/0014), so
a module that raises while importing — any exception, `sys.exit` included —
is one error naming the key, the module and the exception, not a traceback
from inside importlib at the first collective. A module that is not found
is left to `init_process_group` (adr/0012), since a bench may put it on
`sys.path` before then.
"""

from __future__ import annotations

import importlib
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kernbench.ccl.tuner import AUTO
from kernbench.errors import KernbenchError
from kernbench.machine.ipcq import BACKPRESSURE_MODES, BUFFER_KINDS
from kernbench.runtime_api import current_run
from kernbench.topology.document import Document, KeyPath, dotted, parse_document, read_bounded
from kernbench.topology.errors import TopologyError
from kernbench.topology.kinds import describe, suggestion
from kernbench.topology.schema import PROTOCOLS

SHIPPED_CCL_PATH = Path(__file__).resolve().parent.parent / "configs" / "ccl" / "ccl.yaml"
PS_PER_NS = 1000

TOP_KEYS = ("world_size", "defaults", "algorithms")
# Keys a `defaults` block may set; an algorithm's entry may override all but the first two.
PARAMETER_KEYS = ("algorithm", "world_size", "n_elem", "buffer_kind", "backpressure", "n_slots", "slot_size",
                  "poll_interval_ns", "channels", "max_channels", "channel_min_kib", "p2p_channels", "symmetric",
                  "protocol", "candidates")
# `params`: the algorithm's own keys, free-form (a user's algorithm reads them from its config).
ENTRY_KEYS = ("module", "wiring", "params", *PARAMETER_KEYS[2:-1])
# `protocol`: NCCL's protocol a collective runs under where the topology gives protocols (adr/0010, "Protocols");
# `auto` lets the tuner pick per call, as NCCL does.
_CHOICES = {"buffer_kind": BUFFER_KINDS, "backpressure": BACKPRESSURE_MODES, "protocol": (AUTO, *PROTOCOLS)}
_POSITIVE_INTS = ("world_size", "n_elem", "n_slots", "slot_size", "channels", "max_channels", "channel_min_kib",
                  "p2p_channels")

class CclConfigError(KernbenchError):
    """A ccl configuration that cannot be used: the message names the file, the line and the key."""


class CclConfig(dict):
    """A validated ccl.yaml as plain nested data (`cfg["defaults"]["algorithm"]`); `source` says where it came from."""

    def __init__(self, data: Mapping, source: str):
        super().__init__(data)
        self.source = source


def load_ccl_config(path: str | os.PathLike | Mapping | None = None) -> CclConfig:
    """The configuration in `path` (a file, or an already parsed mapping); with no argument, the current run's.

    The current run's is the one its `Session` was given (`kernbench run
    --ccl F`), else the shipped `ccl/ccl.yaml`.
    """
    if path is None:
        if current_run.has_current_run():
            return current_run.current_torch().distributed.ccl_config
        return _load_file(SHIPPED_CCL_PATH)
    if isinstance(path, CclConfig):
        return path
    if isinstance(path, Mapping):
        return _validated(Document("<ccl mapping>", dict(path), {}))
    return _load_file(Path(path))


def with_overrides(cfg: CclConfig, overrides: Mapping, source: str) -> CclConfig:
    """`cfg` with `overrides` laid over its `defaults`, validated as a file would be (errors name `source`)."""
    if not isinstance(overrides, Mapping):
        raise CclConfigError(f"{source}: expected a mapping of defaults keys ({', '.join(PARAMETER_KEYS)}), "
                             f"got {describe(overrides)}")
    merged = {**cfg, "defaults": {**(cfg.get("defaults") or {}), **overrides}}
    return _validated(Document(f"{source} over {cfg.source}", merged, {}))


def resolve_algorithm_config(cfg: Mapping | None = None, algorithm: str | None = None) -> dict:
    """One flat dict: `defaults` with the algorithm's entry over it (its `params` flattened in), plus `algorithm`.

    `algorithm` picks an entry other than `defaults.algorithm` (a sweep over
    algorithms does). `auto` names no entry: the tuner picks one per call
    (`kernbench.ccl.tuner`) out of the entries `defaults.candidates` names
    (every entry of the file when it names none).
    `poll_interval_ns` is also given as `poll_interval_ps`, the unit the
    engine counts in.
    """
    cfg = load_ccl_config(cfg)
    defaults = dict(cfg.get("defaults") or {})
    entries = cfg.get("algorithms") or {}
    name = algorithm if algorithm is not None else defaults.get("algorithm")
    if name is None:
        raise CclConfigError(f"{cfg.source}: defaults.algorithm is not set; "
                             f"expected one of: {', '.join(entries) or '(no algorithms listed)'}")
    if name == AUTO:
        names = defaults.get("candidates") or list(entries)
        flat = {**defaults, "algorithm": AUTO, "candidates": {key: dict(entries[key]) for key in names}}
    elif name not in entries:
        raise CclConfigError(f"{cfg.source}: unknown algorithm {name!r}{suggestion(str(name), list(entries))}; "
                             f"expected one of: {', '.join(entries) or '(no algorithms listed)'}")
    else:
        entry = dict(entries[name])
        flat = {**defaults, **entry.pop("params", {}), **entry, "algorithm": name}
    if "world_size" in cfg:
        flat["world_size"] = cfg["world_size"]
    if "poll_interval_ns" in flat:
        flat["poll_interval_ps"] = round(flat["poll_interval_ns"] * PS_PER_NS)
    return flat


def explicit_world_size(cfg: Mapping | None) -> tuple[int, str] | None:
    """The world size the file sets (top-level `world_size`, else `defaults.world_size`) and where, or None."""
    cfg = load_ccl_config(cfg)
    for key, value in (("world_size", cfg.get("world_size")), ("defaults.world_size",
                                                               (cfg.get("defaults") or {}).get("world_size"))):
        if value:
            return value, f"{cfg.source}: {key}"
    return None


def _load_file(path: Path) -> CclConfig:
    source = str(path)
    try:
        text = read_bounded(path).decode("utf-8")
    except TopologyError as error:  # too large: the message names the file
        raise CclConfigError(str(error)) from None
    except FileNotFoundError:
        raise CclConfigError(f"{source}: no such ccl file") from None
    except UnicodeDecodeError as error:
        raise CclConfigError(f"{source}: the file is not UTF-8 text ({error.reason})") from None
    except OSError as error:
        raise CclConfigError(f"{source}: cannot read the ccl file: {error.strerror or error}") from None
    if _blank(text):
        raise CclConfigError(f"{source}: the file is empty; expected a mapping with {', '.join(TOP_KEYS)}")
    try:
        document = parse_document(text, source)
    except TopologyError as error:  # the YAML reader's message already names file and line
        raise CclConfigError(str(error)) from None
    if path.resolve() != SHIPPED_CCL_PATH:
        document = _over_shipped(document)
    return _validated(document)


def _over_shipped(document: Document) -> Document:
    """A user's file holds only what it overrides (`world_size: 7` alone is a whole ccl file): its
    `defaults` and `algorithms` entries are laid over the shipped file's, key by key.

    A block that is not a mapping is kept as written, so validation names it
    at its line.
    """
    data = document.data
    if not isinstance(data, dict):
        return document
    shipped = _load_file(SHIPPED_CCL_PATH)
    merged = {**shipped, **data}
    for block in ("defaults", "algorithms"):
        if isinstance(data.get(block, {}), dict):
            merged[block] = {**shipped[block], **data.get(block, {})}
    return Document(document.source, merged, document.lines)


def _blank(text: str) -> bool:
    """Only whitespace and comments: no YAML document (the YAML reader would call it an empty topology)."""
    return all(not line.strip() or line.lstrip().startswith("#") for line in text.splitlines())


def _validated(document: Document) -> CclConfig:
    def fail(path: KeyPath, problem: str) -> CclConfigError:
        line = f":{document.line_of(path)}" if document.lines else ""  # a mapping, not a file, has no lines
        return CclConfigError(f"{document.source}{line}: {dotted(path)}: {problem}")

    data = document.data
    if not isinstance(data, dict):
        raise fail((), f"found {describe(data)}; expected a mapping with {', '.join(TOP_KEYS)}")
    _known_keys(data, (), TOP_KEYS, fail)
    if "world_size" in data:
        _check_value(data, ("world_size",), fail)
    defaults = data.get("defaults", {})
    _mapping(defaults, ("defaults",), fail)
    _known_keys(defaults, ("defaults",), PARAMETER_KEYS, fail)
    for key in defaults:
        _check_value(data, ("defaults", key), fail)
    algorithms = data.get("algorithms")
    if algorithms is None:
        raise fail((), "missing key 'algorithms'; expected a mapping of algorithm name to {module, wiring, ...}")
    _mapping(algorithms, ("algorithms",), fail)
    if not algorithms:
        raise fail(("algorithms",), "no algorithms listed; expected at least one name: {module: ...}")
    for name, entry in algorithms.items():
        path = ("algorithms", name)
        if name == AUTO:
            raise fail(path, f"{AUTO!r} is reserved: `algorithm: {AUTO}` lets the tuner pick among the entries")
        _mapping(entry, path, fail)
        _known_keys(entry, path, ENTRY_KEYS, fail)
        if not isinstance(entry.get("module"), str) or not entry["module"]:
            raise fail(path + ("module",), f"found {describe(entry.get('module'))}; expected a Python module path "
                                           "such as kernbench.ccl.algorithms.ring")
        for key in entry:
            _check_value(data, path + (key,), fail)
        params = entry.get("params", {})
        _mapping(params, path + ("params",), fail)
        for key in params:
            if key in ENTRY_KEYS or key == "algorithm":
                raise fail(path + ("params", key), f"{key!r} is a framework key; set it beside `params`, "
                                                    "not inside it")
    chosen = defaults.get("algorithm")
    if chosen is not None and chosen != AUTO and chosen not in algorithms:
        raise fail(("defaults", "algorithm"), f"unknown algorithm {chosen!r}{suggestion(str(chosen), list(algorithms))}"
                                              f"; expected one of: {', '.join(algorithms)}")
    return CclConfig(data, document.source)


def _mapping(value: Any, path: KeyPath, fail) -> None:
    if not isinstance(value, dict):
        raise fail(path, f"found {describe(value)}; expected a mapping")


def _known_keys(block: dict, path: KeyPath, allowed: tuple[str, ...], fail) -> None:
    for key in block:
        if key not in allowed:
            raise fail(path + (key,), f"unknown key{suggestion(str(key), allowed)}; valid keys: {', '.join(allowed)}")


def _check_value(data: dict, path: KeyPath, fail) -> None:
    value = data
    for part in path:
        value = value[part]
    key = path[-1]
    if key in _POSITIVE_INTS:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise fail(path, f"found {describe(value)}; expected a positive integer")
    elif key == "poll_interval_ns":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 or not math.isfinite(value):
            raise fail(path, f"found {describe(value)}; expected a positive number of nanoseconds")
    elif key == "candidates":
        names = list(data.get("algorithms") or {})
        unknown = [name for name in value if name not in names] if isinstance(value, list) else []
        if not isinstance(value, list) or not value or unknown:
            found = f"{', '.join(map(repr, unknown))}, not an entry" if unknown else describe(value)
            raise fail(path, f"found {found}; expected a non-empty list of entries of `algorithms` "
                             f"({', '.join(map(str, names))}) for `algorithm: {AUTO}` to choose among")
    elif key == "symmetric":
        if not isinstance(value, bool):
            raise fail(path, f"found {describe(value)}; expected true or false")
    elif key in _CHOICES:
        if value not in _CHOICES[key]:
            raise fail(path, f"found {describe(value)}; expected one of: {', '.join(_CHOICES[key])}")
    elif key in ("algorithm", "module", "wiring"):
        if not isinstance(value, str) or not value:
            raise fail(path, f"found {describe(value)}; expected a name")
        if key == "module":
            _check_module(value, path, fail)


def _check_module(name: str, path: KeyPath, fail) -> None:
    """An absolute module path that imports, or is not found (yet: see the module docstring)."""
    if not all(part.isidentifier() for part in name.split(".")):
        raise fail(path, f"found {name!r}; expected an absolute Python module path such as "
                         "kernbench.ccl.algorithms.ring (a relative or malformed name cannot be imported)")
    try:
        importlib.import_module(name)
    except ModuleNotFoundError as error:
        if error.name is not None and (name == error.name or name.startswith(f"{error.name}.")):
            return
        raise fail(path, _import_failure(name, error)) from None
    except (Exception, SystemExit) as error:  # a module's own code may raise anything while it runs
        raise fail(path, _import_failure(name, error)) from None


def _import_failure(name: str, error: BaseException) -> str:
    text = str(error).strip().splitlines()
    detail = f"{type(error).__name__}: {text[0]}" if text else type(error).__name__
    if len(detail) > 200:
        detail = detail[:200] + "..."
    return f"importing {name!r} raised {detail}; expected a module that imports"
