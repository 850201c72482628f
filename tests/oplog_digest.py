"""A pytest plugin for differential checks of refactors: every machine a test builds, as a digest of its op log.

A change that must not move a simulated picosecond (a refactor, a speed-up)
is checked by running the suite before and after it with this plugin and
comparing the two files, test by test:

    python -m pytest -p tests.oplog_digest --oplog-digest=/tmp/before.jsonl    # on the old commit
    python -m pytest -p tests.oplog_digest --oplog-digest=/tmp/after.jsonl     # on the new one
    python -m tests.oplog_digest /tmp/before.jsonl /tmp/after.jsonl

A machine's digest covers every op-log row (device, unit, kind, label,
kernel, program, start, duration, args) in append order and the engine's
final time, so two runs agree only if they logged the same ops at the same
picoseconds. Green tests alone say less: most tests check a value or one
time, not the whole timeline.

Hypothesis draws its examples from a seed, a database of earlier failures
and the literal constants of the source files loaded, all of which differ
between checkouts; with this plugin it draws them derandomized, without a
database and without the source's constants (a private switch of
Hypothesis, left alone where a version lacks it), so two checkouts test the
same examples. Tests that race a real signal against the run
(tests/robustness/test_signals.py) still differ from run to run.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import weakref
from pathlib import Path

import pytest

from kernbench.machine.machine import Machine

_built: list = []


def pytest_addoption(parser):
    parser.addoption("--oplog-digest", default=None, metavar="FILE",
                     help="write each test's op-log digests to FILE (one JSON line per test; xdist workers add "
                          "their id to the name)")


def pytest_configure(config):
    if config.getoption("--oplog-digest") is not None:
        from hypothesis import settings

        settings.register_profile("oplog-digest", derandomize=True, database=None)
        settings.load_profile("oplog-digest")
        try:
            from hypothesis.internal.conjecture import providers
        except ImportError:
            return
        if hasattr(providers, "_get_local_constants") and hasattr(providers, "_local_constants"):
            providers._get_local_constants = lambda: providers._local_constants


def _digest(machine) -> str:
    hasher = hashlib.sha256()
    for row in machine.oplog.rows():
        hasher.update(repr(row).encode())
        hasher.update(b"\n")
    hasher.update(f"now={machine.engine.now}".encode())
    return f"{len(machine.oplog)}:{hasher.hexdigest()[:16]}"


@pytest.fixture(autouse=True)
def _oplog_digest(request):
    path = request.config.getoption("--oplog-digest")
    if path is None:
        yield
        return
    original = Machine.__init__

    def recording(self, *args, **kwargs):
        original(self, *args, **kwargs)
        _built.append(weakref.ref(self))

    Machine.__init__ = recording
    try:
        yield
    finally:
        Machine.__init__ = original
        digests = [_digest(machine) for machine in (ref() for ref in _built) if machine is not None]
        _built.clear()
        worker = os.environ.get("PYTEST_XDIST_WORKER")
        target = Path(f"{path}.{worker}" if worker else path)
        with target.open("a") as out:
            out.write(json.dumps({"test": request.node.nodeid, "machines": digests}) + "\n")


def _load(path: Path) -> dict[str, list[str]]:
    lines = []
    for part in sorted(path.parent.glob(path.name + "*")):
        lines += part.read_text().splitlines()
    return {entry["test"]: entry["machines"] for entry in map(json.loads, lines)}


def main(before: str, after: str) -> int:
    """Print every test whose machines differ between two digest files; exit 1 if any does."""
    old, new = _load(Path(before)), _load(Path(after))
    common = sorted(set(old) & set(new))
    differing = [test for test in common if old[test] != new[test]]
    for test in differing:
        print(f"differs: {test}\n  before {old[test]}\n  after  {new[test]}")
    print(f"{len(common)} tests in both, {len(differing)} differ; {len(set(old) - set(new))} only before, "
          f"{len(set(new) - set(old))} only after; {sum(len(old[t]) for t in common)} machines compared")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
