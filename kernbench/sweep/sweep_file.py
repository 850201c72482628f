"""A sweep file: what to run (bench, base topology and ccl.yaml) and over what (axes) — read and checked once.

    bench: ccl_allreduce               # a shipped bench name, or a .py path (relative to this file)
    args: [--timing-only]              # given to every point, after the bench (optional)
    topology: default                  # base topology: shipped name or path (default: default)
    ccl: my_ccl.yaml                   # base ccl.yaml (default: the shipped one)
    timeout_s: 600                     # a point running longer is stopped and recorded (optional)
    axes:                              # the cross product of the axes ...
      topology.system.inter_sip.bandwidth_gb_per_s: [25, 50, 100, 200]
      ccl.defaults.algorithm: [ring, tree]
      --n: {start: 1024, stop: 65536, factor: 4}     # a bench argument: `--n 1024`, ...
    zip:                               # ... times each group of axes that vary together (optional)
      - ccl.defaults.n_slots: [4, 8]
        ccl.defaults.slot_size: [4096, 65536]
    # or, instead of axes and zip, the points themselves:
    # points:
    #   - {ccl.defaults.algorithm: ring, --n: 1024}
    #   - {ccl.defaults.algorithm: tree, --n: 4096}

An axis is named `topology.KEY` or `ccl.KEY` (a key of that file by its
dotted path; a missing key is added, so optional keys can be swept) or
`--OPTION` (a bench argument; `true` passes the bare flag, `false` leaves it
out). Its values are a list, a single value, an arithmetic range
`{start, stop, step}` or a geometric one `{start, stop, factor}` (both
include `stop` when a step lands on it). Every problem is one `SweepError`
naming the file, the line and the key.
"""

from __future__ import annotations

import difflib
import itertools
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kernbench
from kernbench.ccl.install import SHIPPED_CCL_PATH
from kernbench.ccl.install import TOP_KEYS as CCL_TOP_KEYS
from kernbench.sweep.errors import SweepError
from kernbench.topology.document import Document, KeyPath, dotted, parse_document, read_bounded
from kernbench.topology.errors import TopologyError
from kernbench.topology.kinds import describe, suggestion
from kernbench.topology.loader import resolve_topology_path, shipped_topology_names
from kernbench.topology.schema import SCHEMA_TREE

TOP_KEYS = ("bench", "args", "topology", "ccl", "timeout_s", "axes", "zip", "points")
RANGE_KEYS = ("start", "stop", "step", "factor")
TARGETS = ("topology", "ccl")
# Options of `kernbench run` that every point's command sets itself.
RESERVED_OPTIONS = ("--topology", "--ccl", "--json", "--trace")
# A sweep is hundreds of runs, a large study thousands; a product far beyond that is a typo in a range.
MAX_POINTS = 100_000
SHIPPED_BENCHES = Path(kernbench.__file__).resolve().parent / "benches"


@dataclass(frozen=True, slots=True)
class Axis:
    """One thing a sweep varies: a key of the derived topology or ccl.yaml, or a bench option."""

    name: str              # as written in the sweep file: `topology.system.sips.count`, `--n`
    target: str            # "topology", "ccl" or "arg"
    key: tuple[str, ...]   # the key path inside its file; for an argument, the option alone
    line: int              # where the sweep file names it


@dataclass(frozen=True, slots=True)
class Factor:
    """Axes that vary together, and their rows of values; a sweep's points are the product of its factors."""

    axes: tuple[Axis, ...]
    rows: tuple[tuple[Any, ...], ...]
    line: int


@dataclass(frozen=True, slots=True)
class SweepSpec:
    """A checked sweep file. Paths are absolute; `bench` is a shipped name or a path."""

    source: Path
    bench: str
    bench_file: Path
    args: tuple[str, ...]
    topology: Path
    ccl: Path
    timeout_s: float | None
    factors: tuple[Factor, ...]

    @property
    def axes(self) -> tuple[Axis, ...]:
        return tuple(axis for factor in self.factors for axis in factor.axes)

    @property
    def n_points(self) -> int:
        return math.prod(len(factor.rows) for factor in self.factors)


def load_sweep(path: str | Path) -> SweepSpec:
    """Read and check the sweep file at `path`; any problem is one `SweepError` naming file, line and key."""
    path = Path(path)
    source = str(path)
    try:
        text = read_bounded(path).decode("utf-8")
    except TopologyError as error:  # too large: the message names the file
        raise SweepError(str(error)) from None
    except FileNotFoundError:
        raise SweepError(f"{source}: no such sweep file") from None
    except IsADirectoryError:
        raise SweepError(f"{source}: is a directory; expected a sweep file (.yaml)") from None
    except UnicodeDecodeError as error:
        raise SweepError(f"{source}: the file is not UTF-8 text ({error.reason})") from None
    except OSError as error:
        raise SweepError(f"{source}: cannot read the sweep file: {error.strerror or error}") from None
    try:
        document = parse_document(text, source)
    except TopologyError as error:  # the YAML reader's message names the file and line already
        raise SweepError(str(error).replace("expected a topology mapping", "expected a sweep mapping")) from None
    return _Reader(document, path.resolve().parent).spec(path.resolve())


class _Reader:
    """Checks one parsed sweep file, key by key, in the order the file is read."""

    def __init__(self, document: Document, folder: Path):
        self.document = document
        self.folder = folder

    def fail(self, path: KeyPath, problem: str) -> SweepError:
        return SweepError(f"{self.document.source}:{self.document.line_of(path)}: {dotted(path)}: {problem}")

    def spec(self, source: Path) -> SweepSpec:
        data = self.document.data
        if not isinstance(data, dict):
            raise self.fail((), f"found {describe(data)}; expected a mapping with bench and axes (or points)")
        for key in data:
            if key not in TOP_KEYS:
                raise self.fail((key,), f"unknown key{suggestion(str(key), TOP_KEYS)}; valid keys: "
                                        f"{', '.join(TOP_KEYS)}")
        if "bench" not in data:
            raise self.fail((), "missing key 'bench'; expected a shipped bench name or a .py path")
        bench, bench_file = self.bench(data["bench"])
        if "points" in data and ("axes" in data or "zip" in data):
            raise self.fail(("points",), "points lists every point itself; expected either points, "
                                         "or axes (and zip), not both")
        if "points" in data:
            factors = (self.points(data["points"]),)
        elif "axes" in data or "zip" in data:
            factors = self.axes(data.get("axes", {})) + self.zips(data.get("zip", []))
        else:
            raise self.fail((), "missing key 'axes'; expected axes (a mapping of axis to values), zip or points")
        self.unique_axes(factors)
        n_points = math.prod(len(factor.rows) for factor in factors)
        if n_points > MAX_POINTS:
            raise self.fail((), f"the axes make {n_points:,} points, above the limit of {MAX_POINTS:,}; "
                                "expected fewer values, or points listed one by one")
        return SweepSpec(source=source, bench=bench, bench_file=bench_file, args=self.args(data.get("args", [])),
                         topology=self.topology(data.get("topology")), ccl=self.ccl(data.get("ccl")),
                         timeout_s=self.timeout(data.get("timeout_s")), factors=factors)

    # -- what runs

    def bench(self, value: Any) -> tuple[str, Path]:
        if not isinstance(value, str) or not value:
            raise self.fail(("bench",), f"found {describe(value)}; expected a shipped bench name or a .py path")
        given = Path(value)
        if given.suffix == ".py" or len(given.parts) > 1:
            file = self.folder / given
            if not file.is_file():
                raise self.fail(("bench",), f"no bench file {file}; expected a .py file (relative to the sweep "
                                            "file) or a shipped bench name")
            return str(file), file
        shipped = SHIPPED_BENCHES / f"{value}.py"
        if not shipped.is_file():
            names = sorted(p.stem for p in SHIPPED_BENCHES.glob("*.py") if not p.name.startswith("_"))
            raise self.fail(("bench",), f"no shipped bench named {value!r}{suggestion(value, names)}; expected "
                                        f"one of {', '.join(names)}, or a .py path")
        return value, shipped

    def args(self, value: Any) -> tuple[str, ...]:
        if not isinstance(value, list):
            raise self.fail(("args",), f"found {describe(value)}; expected a list of bench arguments")
        args = []
        for index, item in enumerate(value):
            if isinstance(item, (dict, list)) or item is None:
                raise self.fail(("args", index), f"found {describe(item)}; expected a word or a number")
            word = argument_text(item)
            if word.split("=")[0] in RESERVED_OPTIONS:
                raise self.fail(("args", index), f"{word.split('=')[0]} is set by the sweep for each point; "
                                                 "expected the topology:/ccl: keys or topology./ccl. axes instead")
            args.append(word)
        return tuple(args)

    def topology(self, value: Any) -> Path:
        if value is None:
            return resolve_topology_path(None)
        if not isinstance(value, str) or not value:
            raise self.fail(("topology",), f"found {describe(value)}; expected a shipped name "
                                           f"({', '.join(shipped_topology_names())}) or a path")
        if value in shipped_topology_names():
            return resolve_topology_path(value)
        file = self.folder / value
        if not file.is_file():
            raise self.fail(("topology",), f"no topology file {file}; expected a path (relative to the sweep "
                                           f"file) or a shipped name ({', '.join(shipped_topology_names())})")
        return file

    def ccl(self, value: Any) -> Path:
        if value is None:
            return SHIPPED_CCL_PATH
        if not isinstance(value, str) or not value:
            raise self.fail(("ccl",), f"found {describe(value)}; expected a path to a ccl.yaml")
        file = self.folder / value
        if not file.is_file():
            raise self.fail(("ccl",), f"no ccl file {file}; expected a path relative to the sweep file")
        return file

    def timeout(self, value: Any) -> float | None:
        if value is None:
            return None
        if not _is_number(value) or not value > 0 or not math.isfinite(value):
            raise self.fail(("timeout_s",), f"found {describe(value)}; expected a positive number of seconds")
        return float(value)

    # -- what varies

    def axes(self, value: Any) -> tuple[Factor, ...]:
        if not isinstance(value, dict):
            raise self.fail(("axes",), f"found {describe(value)}; expected a mapping of axis name to values")
        factors = []
        for name, spec in value.items():
            axis = self.axis(("axes", name))
            factors.append(Factor((axis,), tuple((v,) for v in self.values(("axes", name), spec, axis)), axis.line))
        return tuple(factors)

    def zips(self, value: Any) -> tuple[Factor, ...]:
        if not isinstance(value, list):
            raise self.fail(("zip",), f"found {describe(value)}; expected a list of groups of axes "
                                      "(mappings of axis name to equally long lists)")
        factors = []
        for index, group in enumerate(value):
            where = ("zip", index)
            if not isinstance(group, dict) or not group:
                raise self.fail(where, f"found {describe(group)}; expected a mapping of axis name to values")
            axes = tuple(self.axis(where + (name,)) for name in group)
            columns = [self.values(where + (axis.name,), spec, axis) for axis, spec in zip(axes, group.values())]
            lengths = {axis.name: len(column) for axis, column in zip(axes, columns)}
            if len(set(lengths.values())) > 1:
                counts = ", ".join(f"{name}: {n}" for name, n in lengths.items())
                raise self.fail(where, f"axes of one zip group vary together, so they need as many values each; "
                                       f"found {counts}")
            factors.append(Factor(axes, tuple(zip(*columns)), self.document.line_of(where)))
        return tuple(factors)

    def points(self, value: Any) -> Factor:
        if not isinstance(value, list) or not value:
            raise self.fail(("points",), f"found {describe(value)}; expected a list of points "
                                         "(mappings of axis name to one value)")
        axes: tuple[Axis, ...] = ()
        rows = []
        for index, point in enumerate(value):
            where = ("points", index)
            if not isinstance(point, dict) or not point:
                raise self.fail(where, f"found {describe(point)}; expected a mapping of axis name to one value")
            if index == 0:
                axes = tuple(self.axis(where + (name,)) for name in point)
            else:
                names = [axis.name for axis in axes]
                if set(point) != set(names):
                    missing = [n for n in names if n not in point]
                    extra = [n for n in point if n not in names]
                    raise self.fail(where, f"every point names the same axes ({', '.join(names)}); this one "
                                           + "; ".join(filter(None, [missing and f"lacks {', '.join(missing)}",
                                                                     extra and f"adds {', '.join(extra)}"])))
            rows.append(tuple(self.one_value(where + (axis.name,), point[axis.name], axis) for axis in axes))
        return Factor(axes, tuple(rows), self.document.line_of(("points",)))

    def axis(self, path: KeyPath) -> Axis:
        name = path[-1]
        line = self.document.line_of(path)
        if not isinstance(name, str):
            raise self.fail(path, f"found {describe(name)} as an axis name; expected topology.KEY, ccl.KEY "
                                  "or --OPTION")
        if name.startswith("--") and len(name) > 2 and " " not in name and "=" not in name:
            if name in RESERVED_OPTIONS:
                raise self.fail(path, f"{name} is set by the sweep for each point; expected the "
                                      f"{name.lstrip('-')}: key, or {name.lstrip('-')}.KEY axes")
            return Axis(name, "arg", (name,), line)
        target, _, rest = name.partition(".")
        key = tuple(rest.split("."))
        if target in TARGETS and rest and all(key):
            return Axis(name, target, key, line)
        raise self.fail(path, f"unknown axis{_axis_hint(name)}; expected topology.KEY, ccl.KEY (a dotted key "
                              "path of that file) or --OPTION (a bench argument)")

    def values(self, path: KeyPath, spec: Any, axis: Axis) -> tuple[Any, ...]:
        if isinstance(spec, list):
            if not spec:
                raise self.fail(path, "found an empty list; expected at least one value")
            values = tuple(self.one_value(path + (i,), v, axis) for i, v in enumerate(spec))
        elif isinstance(spec, dict):
            values = self.range(path, spec)
        else:
            values = (self.one_value(path, spec, axis),)
        seen = set()  # by type and value, in one pass: a range may hold 100,000 values
        for value in values:
            key = (type(value), json.dumps(value, sort_keys=True) if isinstance(value, (dict, list)) else value)
            if key in seen:
                raise self.fail(path, f"the value {value!r} is listed twice; expected distinct values "
                                      "(each point runs once)")
            seen.add(key)
        return values

    def one_value(self, path: KeyPath, value: Any, axis: Axis) -> Any:
        if value is None:
            raise self.fail(path, "found nothing (null); expected a value")
        if isinstance(value, float) and not math.isfinite(value):
            raise self.fail(path, f"found {value!r}; expected a finite number")
        if axis.target == "arg" and isinstance(value, (dict, list)):
            raise self.fail(path, f"found {describe(value)}; a bench argument takes a word, a number or true/false")
        return value

    def range(self, path: KeyPath, spec: dict) -> tuple[Any, ...]:
        for key in spec:
            if key not in RANGE_KEYS:
                raise self.fail(path + (key,), f"unknown range key{suggestion(str(key), RANGE_KEYS)}; expected "
                                               "{start, stop, step} or {start, stop, factor} (or a list of values)")
        for key in ("start", "stop"):
            if key not in spec:
                raise self.fail(path, f"a range needs {key}; expected {{start, stop, step}} or "
                                      "{start, stop, factor}")
            if not _is_number(spec[key]) or not math.isfinite(spec[key]):
                raise self.fail(path + (key,), f"found {describe(spec[key])}; expected a number")
        if ("step" in spec) == ("factor" in spec):
            raise self.fail(path, "a range needs exactly one of step (start, start+step, ...) and factor "
                                  "(start, start*factor, ...)")
        start, stop = spec["start"], spec["stop"]
        if stop < start:
            raise self.fail(path + ("stop",), f"found {stop!r}, below start {start!r}; expected stop >= start")
        kind = "step" if "step" in spec else "factor"
        by = spec[kind]
        if not _is_number(by) or not math.isfinite(by) or not (by > 0 if kind == "step" else by > 1):
            raise self.fail(path + (kind,), f"found {describe(by)}; expected a number "
                                            + ("above 0" if kind == "step" else "above 1"))
        if kind == "factor" and start <= 0:
            raise self.fail(path + ("start",), f"found {start!r}; a geometric range needs start > 0")
        exact = all(isinstance(v, int) for v in (start, stop, by))
        values = []
        for i in itertools.count():
            value = start + i * by if kind == "step" else start * by ** i
            if not exact:
                value = float(f"{value:.12g}")  # 0.1 * 3 is 0.30000000000000004; the user wrote 0.3
            if value > stop * (1 + 1e-12):
                break
            values.append(value)
            if len(values) > MAX_POINTS:
                raise self.fail(path, f"the range has more than {MAX_POINTS:,} values; expected a larger "
                                      f"{kind}")
        return tuple(values)

    def unique_axes(self, factors: tuple[Factor, ...]) -> None:
        seen: dict[str, int] = {}
        for factor in factors:
            for axis in factor.axes:
                if axis.name in seen:
                    raise SweepError(f"{self.document.source}:{axis.line}: {axis.name}: the axis is already "
                                     f"named at line {seen[axis.name]}; expected each axis once")
                seen[axis.name] = axis.line


def argument_text(value: Any) -> str:
    """How a value is written on a command line: `1024`, `0.5`, `ring`."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _axis_hint(name: str) -> str:
    """' (did you mean topology.system.sips.count?)' for a key path given without its file."""
    first = name.split(".")[0]
    if first in SCHEMA_TREE:
        return f" (did you mean 'topology.{name}'?)"
    if first in CCL_TOP_KEYS:
        return f" (did you mean 'ccl.{name}'?)"
    close = difflib.get_close_matches(first, TARGETS, n=1, cutoff=0.6)
    if close and "." in name:
        return f" (did you mean '{close[0]}.{name.partition('.')[2]}'?)"
    if "." not in name and name.replace("-", "").replace("_", "").isalnum():
        return f" (did you mean '--{name.lstrip('-')}'?)"
    return ""
