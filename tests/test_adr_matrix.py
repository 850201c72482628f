"""Every ADR's test matrix is backed by tests, and every ADR test is listed.

The matrix is the table in each `adr/NNNN-*.md` whose rows start with `| Tn |`
and whose last column names the test node (or several, comma-separated), e.g.
`tests/topology/test_loader.py::test_adr0002_t3_unknown_key_is_named`.
"""

from __future__ import annotations

import ast
import functools
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MATRIX_ROW = re.compile(r"^\|\s*(T\d+)\s*\|.*\|\s*([^|]*::[^|]*?)\s*\|\s*$")
TEST_NODE = re.compile(r"[^\s`,]+::[^\s`,]+")  # one or more in a row's last column, each in backticks
ADR_TEST_NAME = re.compile(r"^test_adr(\d{4})_t(\d+)_")


def adr_records() -> list[Path]:
    return sorted((ROOT / "adr").glob("[0-9][0-9][0-9][0-9]-*.md"))


def matrix_rows(record: Path) -> list[tuple[str, str]]:
    rows = []
    for line in record.read_text().splitlines():
        match = MATRIX_ROW.match(line.strip())
        if match:
            rows.extend((match.group(1), node) for node in TEST_NODE.findall(match.group(2)))
    return rows


@functools.cache
def functions_of_test_files() -> dict[Path, tuple[frozenset[str], frozenset[str]]]:
    """Each test file's functions where pytest looks for tests (at module level and in classes), and those of them
    marked `@pytest.mark.quick`: parsed when a test here first asks, not when the module is collected (every xdist
    worker collects it, most run none of its tests), and without walking into function bodies (a test is not
    defined inside a function). Names only are kept: the syntax trees of every test file, kept for the rest of a
    worker's run, made each of its later full garbage collections longer."""
    found = {}
    for path in (ROOT / "tests").rglob("test_*.py"):
        nodes = list(_functions(ast.parse(path.read_text(), filename=str(path)).body))
        quick = (node.name for node in nodes
                 if any(ast.unparse(mark) == "pytest.mark.quick" for mark in node.decorator_list))
        found[path.resolve()] = (frozenset(node.name for node in nodes), frozenset(quick))
    return found


def _functions(body: list[ast.stmt]):
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node.body)


@functools.cache
def collect_test_functions() -> dict[Path, set[str]]:
    return {path: {name for name in names if name.startswith("test_")}
            for path, (names, _) in functions_of_test_files().items()}


def collect_quick_tests() -> set[str]:
    """Names of the test functions marked `@pytest.mark.quick`, in every test file."""
    return {name for _, quick in functions_of_test_files().values() for name in quick}


@pytest.mark.parametrize("record", adr_records(), ids=lambda p: p.name)
def test_every_listed_id_names_an_existing_test_carrying_that_id(record):
    number = record.name[:4]
    rows = matrix_rows(record)
    assert rows, f"{record.name} has no test matrix rows ('| Tn | ... | tests/x.py::test_... |')"
    problems = []
    for test_id, node in rows:
        file_part, _, function = node.partition("::")
        function = function.split("[")[0]
        names = collect_test_functions().get((ROOT / file_part).resolve())
        if names is None:
            problems.append(f"{test_id}: {file_part} does not exist")
        elif function not in names:
            problems.append(f"{test_id}: {file_part} has no test {function}")
        elif not function.startswith(f"test_adr{number}_{test_id.lower()}_"):
            problems.append(f"{test_id}: {function} does not carry the id (expected test_adr{number}_{test_id.lower()}_...)")
    assert not problems, f"{record.name}:\n" + "\n".join(problems)


def test_every_adr_test_is_listed_in_its_record():
    listed = {(r.name[:4], test_id.lower()) for r in adr_records() for test_id, _ in matrix_rows(r)}
    unlisted = sorted(
        f"{path.relative_to(ROOT)}::{name}"
        for path, names in collect_test_functions().items()
        for name in names
        if (m := ADR_TEST_NAME.match(name)) and (m.group(1), f"t{m.group(2)}") not in listed
    )
    assert not unlisted, "tests carry ADR ids that no record lists:\n" + "\n".join(unlisted)


def test_a_records_marker_selects_its_tests():
    """`pytest -m adrNNNN` runs one record's matrix (README): the marker tests/conftest.py derives from a test's
    name selects exactly that record's tests of a file."""
    path = "tests/tp/test_layers.py"
    collected = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-n0", "-p", "no:cacheprovider",
                                "-m", "adr0011", path], cwd=ROOT, capture_output=True, text=True).stdout
    selected = {line.split("::")[1].split("[")[0] for line in collected.splitlines() if line.startswith(path)}
    names = collect_test_functions()[ROOT / path]
    assert selected == {name for name in names if name.startswith("test_adr0011_")}, collected


@pytest.mark.quick
def test_adr0001_t11_every_record_with_a_test_matrix_has_a_quick_test():
    """`pytest -m quick` covers every decision record: each record's matrix has at least one test marked quick."""
    covered = {m.group(1) for name in collect_quick_tests() if (m := ADR_TEST_NAME.match(name))}
    uncovered = [record.name for record in adr_records() if matrix_rows(record) and record.name[:4] not in covered]
    assert not uncovered, ("records with no test marked @pytest.mark.quick (mark a fast, representative one):\n"
                           + "\n".join(uncovered))
