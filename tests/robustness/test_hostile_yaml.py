"""ADR 0014, hostile YAML: alias bombs, numbers beyond 64 bits and algorithm modules that will not import
are one line each; fuzzed topology and ccl text is a success or one line, never anything else."""

from __future__ import annotations

import contextlib
import io
import re
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernbench.cli import main
from kernbench.topology.document import MAX_BYTES, MAX_VALUES
from tests.cli import run_kernbench_in_process
from tests.robustness.harness import (
    CCL_PROBE,
    SHIPPED_CCL,
    SHIPPED_TOPOLOGY,
    assert_one_error_line,
    kernbench,
    line_of,
    write,
)

GIB = 2**30


def alias_bomb(levels: int = 9, width: int = 10) -> str:
    """The "billion laughs": each level a list of `width` aliases of the level before (width^levels strings)."""
    lines = ["lol0: &lol0 [" + ", ".join(["lol"] * width) + "]"]
    for level in range(1, levels + 1):
        lines.append(f"lol{level}: &lol{level} [" + ", ".join([f"*lol{level - 1}"] * width) + "]")
    return "\n".join(lines) + "\n"


def first_line_over_the_bound(width: int = 10) -> int:
    """The line of the first level whose expansion, 1 + width·(the level below), passes MAX_VALUES."""
    size, line = 1 + width, 1
    while size <= MAX_VALUES:
        size, line = 1 + width * size, line + 1
    return line


@pytest.mark.parametrize("kind", ["topology", "ccl"])
def test_adr0014_t13_an_alias_bomb_is_one_line_at_its_line_quickly_in_bounded_memory(tmp_path, kind):
    bomb = write(tmp_path, f"{kind}.yaml", alias_bomb() + (SHIPPED_TOPOLOGY if kind == "topology" else SHIPPED_CCL))
    args = ("topo", str(bomb)) if kind == "topology" else \
        ("run", str(write(tmp_path, "probe.py", CCL_PROBE)), "--ccl", str(bomb))
    began = time.monotonic()
    result = kernbench(*args, cwd=tmp_path, memory_limit=2 * GIB)  # the unbounded loader grew past this in seconds
    assert time.monotonic() - began < 20
    assert_one_error_line(result, f"{bomb}:{first_line_over_the_bound()}: aliases expand this value to ",
                          f"above the limit of {MAX_VALUES:,}")


@pytest.mark.parametrize("kind, old, new, key", [
    ("topology", "clock_ghz: 1.5", "clock_ghz: 1.0e+308", "pe.clock_ghz"),
    ("topology", "lanes: 64", "lanes: 123456789012345678901234567890", "pe.vector_unit.lanes"),
    ("ccl", "poll_interval_ns: 20", "poll_interval_ns: .inf", "defaults.poll_interval_ns"),
    ("ccl", "n_elem: ", "n_elem: 99999999999999999999999 #", "defaults.n_elem"),
])
def test_adr0014_t14_a_number_out_of_range_is_one_schema_error_naming_file_line_and_key(tmp_path, kind, old, new,
                                                                                     key):
    shipped = SHIPPED_TOPOLOGY if kind == "topology" else SHIPPED_CCL
    assert shipped.count(old) == 1, old
    text = shipped.replace(old, new)
    path = write(tmp_path, f"{kind}.yaml", text)
    args = ("topo", str(path)) if kind == "topology" else \
        ("run", str(write(tmp_path, "probe.py", CCL_PROBE)), "--ccl", str(path))
    assert_one_error_line(run_kernbench_in_process(*args, cwd=tmp_path), f"{path}:{line_of(text, new)}: {key}: found ")


RAISES = "raise RuntimeError('no GPU here')\n"
EXITS = "import sys\nsys.exit(7)\n"
BROKEN_IMPORT = "from os import no_such_name\n"


@pytest.mark.parametrize("module, source, needles", [
    ("raises_on_import", RAISES, ["importing 'raises_on_import' raised RuntimeError: no GPU here"]),
    ("exits_on_import", EXITS, ["importing 'exits_on_import' raised SystemExit: 7"]),
    ("imports_a_missing_name", BROKEN_IMPORT, ["importing 'imports_a_missing_name' raised ImportError"]),
    ("..ring", None, ["found '..ring'; expected an absolute Python module path"]),
    ("kernbench.ccl.algorithms.ring.all_reduce", None,
     ["cannot import 'kernbench.ccl.algorithms.ring.all_reduce'", "is not a package"]),
])
def test_adr0014_t15_an_algorithm_module_that_will_not_import_is_one_line_naming_it(tmp_path, module, source,
                                                                                  needles):
    if source is not None:
        write(tmp_path, f"{module}.py", source)
    config = write(tmp_path, "ccl.yaml", SHIPPED_CCL.replace("module: kernbench.ccl.algorithms.ring",
                                                             f"module: {module}", 1))
    result = run_kernbench_in_process("run", str(write(tmp_path, "probe.py", CCL_PROBE)), "--ccl", str(config),
                                      cwd=tmp_path, python_path=tmp_path)
    assert_one_error_line(result, "algorithms.ring.module", *needles)


# ---- fuzzing: the command line's contract over hostile text ------------------------------------------

HOSTILE_VALUES = [
    "1.0e+308", "-1.0e+308", "9223372036854775808", "123456789012345678901234567890", ".inf", "-.inf", ".nan",
    "0x7fffffffffffffffffff", "1e308", "0", "-0", "-1", "0.0000001", "190:20:30", "1_000", "yes", "null", "~",
    "''", "[]", "{}", "[1, [2, [3]]]", "*nowhere", "&anchor 5", "!!python/object:os.system", "!!binary aGk=",
    "!!set {a, b}", "'\u202e'", "\"\\x00\"", "{<<: *nowhere}", "&a [*a]",
]
FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# A scalar value after `key: `, in block or flow style (`count: 4` in `sips: {count: 4}`).
SCALAR = re.compile(r"(?<=: )[^\s,{}\[\]#&*!][^,{}\[\]#]*?(?=\s*(?:[,}\]#]|$))")
printable = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=8)


@st.composite
def hostile_text(draw, shipped: str) -> str:
    """The shipped file with a few edits a hostile user would make: scalar values swapped for hostile ones,
    alias bombs of random size, lines dropped, duplicated or cut, and characters inserted."""
    lines = shipped.splitlines()
    for _ in range(draw(st.integers(1, 3))):
        action = draw(st.sampled_from(["value", "value", "value", "bomb", "drop", "duplicate", "cut", "insert"]))
        at = draw(st.integers(0, len(lines) - 1))
        line = lines[at]
        scalars = list(SCALAR.finditer(line))
        if action == "value" and scalars:
            scalar = draw(st.sampled_from(scalars))
            value = draw(st.sampled_from(HOSTILE_VALUES) | printable)
            lines[at] = line[:scalar.start()] + value + line[scalar.end():]
        elif action == "bomb":
            lines = alias_bomb(draw(st.integers(1, 8)), draw(st.integers(1, 12))).splitlines() + lines
        elif action == "drop":
            del lines[at]
        elif action == "duplicate":
            lines.insert(at, line)
        elif action == "cut":
            lines[at] = line[:draw(st.integers(0, len(line)))]
        elif action == "insert":
            cut = draw(st.integers(0, len(line)))
            lines[at] = line[:cut] + draw(printable | st.text(max_size=2)) + line[cut:]
    return "\n".join(lines) + "\n"


def run_cli(*args: str) -> tuple[int, str]:
    """`kernbench ARGS` in this process (hundreds of examples would take minutes as child processes)."""
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        try:
            status = main(list(args))
        except SystemExit as exit_:  # argparse's own usage errors
            status = exit_.code
    return status, err.getvalue()


def assert_success_or_one_line(status: int, stderr: str) -> None:
    assert status == 0 or (status == 2 and stderr.startswith("kernbench: error: ") and stderr.count("\n") == 1), \
        (status, stderr)


@FUZZ
@given(text=hostile_text(SHIPPED_TOPOLOGY))
def test_adr0014_t16_fuzzed_topology_text_is_a_success_or_one_line(tmp_path_factory, text):
    path = tmp_path_factory.getbasetemp() / "fuzzed_topology.yaml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    assert_success_or_one_line(*run_cli("topo", str(path), "--json"))


@settings(FUZZ, max_examples=40)
@given(text=hostile_text(SHIPPED_CCL))
def test_adr0014_t17_fuzzed_ccl_text_is_a_success_or_one_line(tmp_path_factory, text):
    folder = tmp_path_factory.getbasetemp()
    path = folder / "fuzzed_ccl.yaml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    probe = folder / "ccl_probe.py"
    if not probe.exists():
        probe.write_text(CCL_PROBE)
    assert_success_or_one_line(*run_cli("run", str(probe), "--ccl", str(path), "--timing-only"))


@pytest.mark.parametrize("kind", ["topology", "ccl", "sweep", "device"])
def test_adr0014_t42_a_yaml_file_above_the_size_limit_is_one_line_naming_it_before_it_is_parsed(tmp_path, kind):
    # 100 MB of comments: PyYAML would read them for most of a minute, and /dev/zero never ends.
    comment = "# " + "x" * 77 + "\n"
    huge = tmp_path / f"{kind}.yaml"
    if kind == "device":
        huge = Path("/dev/zero")
    else:
        with open(huge, "w") as file:
            file.write("bench: ccl_allreduce\naxes: {--n: [1]}\n" if kind == "sweep" else "")
            for _ in range(100 * 2**20 // (len(comment) * 4096)):
                file.write(comment * 4096)
    args = {"topology": ("topo", str(huge)), "device": ("run", "ccl_allreduce", "--topology", str(huge)),
            "ccl": ("run", "ccl_allreduce", "--ccl", str(huge)), "sweep": ("sweep", str(huge), "--dry-run")}[kind]
    began = time.monotonic()
    result = kernbench(*args, cwd=tmp_path, memory_limit=2 * GIB)
    assert time.monotonic() - began < 10
    assert_one_error_line(result, f"kernbench: error: {huge}: the file is larger than {MAX_BYTES >> 20} MiB, the most "
                                  "a YAML file may hold here; expected a configuration of a few kilobytes\n")
    assert MAX_BYTES > 100 * len(SHIPPED_TOPOLOGY.encode()), "far above any real file"
