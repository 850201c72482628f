"""Each point's own inputs: its derived topology and ccl.yaml, its bench arguments, and its input hash.

A derived file is the base file with the point's keys replaced (a missing
key is added, a missing mapping on the way created). Every derived file is
loaded with the loaders a run uses (`load_topology`, `load_ccl_config`)
before anything runs, so a value no run would accept stops the sweep at
once, in one line naming the point and the key. Checks that need the
machine and the bench together (slot counts against the topology's IPCQ
depth, world sizes) happen when the point runs, as in any `kernbench run`,
and a point that fails them is recorded as failed.

The input hash is what resume compares: SHA-256 over the bench file's
bytes, the derived topology and ccl data (as canonical JSON, so comments
and formatting do not count), the point's argument words and kernbench's
version. Two points with one hash would be one run twice, and are refused.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import re
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import yaml

import kernbench
from kernbench.ccl.install import load_ccl_config
from kernbench.errors import KernbenchError
from kernbench.sweep.errors import SweepError
from kernbench.sweep.points import Point
from kernbench.sweep.sweep_file import Axis, SweepSpec, argument_text
from kernbench.topology.document import parse_document, read_bounded
from kernbench.topology.kinds import describe
from kernbench.topology.loader import load_topology

_LOCATION = re.compile(r"^(\d+: )?")
PROGRESS_S = 5.0


@dataclass(frozen=True, slots=True)
class PointTask:
    """Everything one point's run needs, as plain values: what an executor ships to wherever it runs."""

    index: int
    key: str                               # the input hash, hex
    values: tuple[tuple[str, Any], ...]    # (axis name, value), in the sweep file's order
    bench: str                             # a shipped bench name or a path on this machine
    bench_text: str                        # the bench file, for executors that run elsewhere
    topology_text: str
    ccl_text: str
    argv: tuple[str, ...]                  # after the bench: the sweep's args, then the point's options
    timeout_s: float | None

    @property
    def short_key(self) -> str:
        return self.key[:12]

    @property
    def bench_is_file(self) -> bool:
        """Whether `bench` is a file's path (else a shipped bench's name, which every kernbench has)."""
        return Path(self.bench).suffix == ".py" or len(Path(self.bench).parts) > 1


def derive_tasks(spec: SweepSpec, points: list[Point], log: TextIO | None = None) -> list[PointTask]:
    """One checked task per point; the first point that no run would accept is a `SweepError`.

    Points share files (an axis over bench arguments leaves both files as
    the base's): a file is copied only for a point whose axes change it, and
    each distinct file is written as YAML and checked once, so the points of
    an arguments-only sweep cost a hash each. Distinct files cost a check
    each (milliseconds); when that takes long a line on `log` (default
    stderr) says how far it got, every `PROGRESS_S` seconds.
    """
    base = {"topology": _base(spec, spec.topology, "topology", load_topology),
            "ccl": _base(spec, spec.ccl, "ccl", load_ccl_config)}
    base_canonical = {target: json.dumps(data, sort_keys=True) for target, data in base.items()}
    bench_bytes = spec.bench_file.read_bytes()
    bench_text = bench_bytes.decode("utf-8", "replace")
    bench_hash = hashlib.sha256(bench_bytes).hexdigest()
    checked: dict[tuple[str, str], tuple[str, str | None]] = {}  # (target, canonical) -> (YAML text, problem)
    first_of: dict[str, int] = {}
    tasks = []
    began = reported = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kernbench-sweep-") as folder:
        for point in points:
            changed = {axis.target for axis, _ in point.values if axis.target != "arg"}
            data = {target: copy.deepcopy(base[target]) if target in changed else base[target] for target in base}
            argv = list(spec.args)
            for axis, value in point.values:
                if axis.target == "arg":
                    argv += option_words(axis.name, value)
                else:
                    _replace(data[axis.target], axis, value, f"{spec.source}:{axis.line}: {point.label(len(points))}")
            canonical = {target: json.dumps(data[target], sort_keys=True) if target in changed
                         else base_canonical[target] for target in data}
            texts = {}
            for target, loader in (("topology", load_topology), ("ccl", load_ccl_config)):
                known = checked.get((target, canonical[target]))
                if known is None:  # points often share a file: write and check it once
                    text = _yaml(data[target])
                    known = checked[(target, canonical[target])] = (
                        text, _problem(text, Path(folder) / f"{target}.yaml", loader))
                texts[target], problem = known
                if problem is not None:
                    axis = _axis_named_in(problem, point, target)
                    line = f":{axis.line}" if axis else ""
                    raise SweepError(f"{spec.source}{line}: {point.label(len(points))}: {target}: {problem}")
            key = input_hash(bench_hash, canonical["topology"], canonical["ccl"], argv)
            if key in first_of:
                raise SweepError(f"{spec.source}: points {first_of[key]} and {point.index} are the same run "
                                 f"(same bench, files and arguments); expected every point to differ")
            first_of[key] = point.index
            tasks.append(PointTask(index=point.index, key=key,
                                   values=tuple((axis.name, value) for axis, value in point.values),
                                   bench=spec.bench, bench_text=bench_text, topology_text=texts["topology"],
                                   ccl_text=texts["ccl"], argv=tuple(argv), timeout_s=spec.timeout_s))
            if time.monotonic() - reported > PROGRESS_S:
                reported = time.monotonic()
                print(f"kernbench sweep: checked {len(tasks):,} of {len(points):,} points "
                      f"({len(checked):,} distinct files, {reported - began:.0f} s)", file=log or sys.stderr,
                      flush=True)
    return tasks


def input_hash(bench_hash: str, topology: str, ccl: str, argv: list[str]) -> str:
    """SHA-256 of what decides a point's result (see the module docstring): of the JSON object
    `json.dumps({"argv", "bench", "ccl", "kernbench", "topology"}, sort_keys=True)` writes.

    The files' canonical texts are most of those bytes, and a sweep's points
    share a few of them: each is encoded as a JSON string once
    (`_json_string`), where encoding it again for each of 100,000 points
    took seconds. The bytes hashed, and so the keys, are the same.
    """
    text = (f'{{"argv": {json.dumps(list(argv))}, "bench": {_json_string(bench_hash)}, "ccl": {_json_string(ccl)}, '
            f'"kernbench": {_json_string(kernbench.__version__)}, "topology": {_json_string(topology)}}}')
    return hashlib.sha256(text.encode()).hexdigest()


@functools.lru_cache(maxsize=256)
def _json_string(text: str) -> str:
    return json.dumps(text)


def option_words(option: str, value: Any) -> list[str]:
    """`--n 16`; a true flag alone (`--timing-only`), a false one left out."""
    if value is True:
        return [option]
    if value is False:
        return []
    return [option, argument_text(value)]


def _base(spec: SweepSpec, path: Path, target: str, loader) -> Any:
    """The base file as plain data, once its loader has accepted it."""
    try:
        loader(path)
    except KernbenchError as error:
        raise SweepError(f"{spec.source}: base {target}: {error}") from None
    return parse_document(read_bounded(path).decode("utf-8"), str(path)).data


def _replace(data: dict, axis: Axis, value: Any, where: str) -> None:
    """Set `axis`'s key in `data` to `value`, creating missing mappings on the way; `where` starts an error."""
    node = data
    for depth, part in enumerate(axis.key[:-1]):
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            inner = ".".join(axis.key[:depth + 1])
            raise SweepError(f"{where}: {axis.name}: {inner} is {describe(child)} in the base {axis.target}, "
                             "not a mapping; expected a key path through mappings")
        node = child
    node[axis.key[-1]] = copy.deepcopy(value)


def _problem(text: str, path: Path, loader) -> str | None:
    """What `loader` says about `text` written as a file, without the temporary file's name; None if accepted."""
    path.write_text(text, encoding="utf-8")
    try:
        loader(path)
    except KernbenchError as error:
        return _LOCATION.sub("", str(error).replace(f"{path}:", "", 1).lstrip(), count=1)
    return None


def _axis_named_in(problem: str, point: Point, target: str) -> Axis | None:
    for axis, _ in point.values:
        if axis.target == target and problem.startswith(".".join(axis.key)):
            return axis
    return None


def _yaml(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, default_flow_style=None, width=120)
