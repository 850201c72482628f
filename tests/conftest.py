"""Project-wide test wiring: ADR markers derived from test names, and the package compiled once for the
interpreters the tests start.

A test that implements row `Tn` of `adr/NNNN-*.md` is named
`test_adrNNNN_tn_<behaviour>`. This hook gives it the marker `adrNNNN`, so
`pytest -m adr0003` runs one decision record's matrix.

About a hundred tests run `python -m kernbench` as a user would, each in a
fresh interpreter. Where bytecode is not written (PYTHONDONTWRITEBYTECODE,
as on some hosts), each of them compiled the package from source again:
0.17 s of a 0.75 s run. Where it is written, a child run under a file-size
limit (ADR 0014's output tests) can leave a cut-short `.pyc` that later
interpreters fail to load. So the run compiles the package once, where
Python keeps its bytecode (`__pycache__`, ignored by git), and the
interpreters it starts read it and write none (PYTHONDONTWRITEBYTECODE).

The test processes themselves (the xdist workers, or the one process with
`-n0`) do write bytecode, whatever the environment says: pytest keeps each
test module's assertion-rewritten code there, and without it every worker
rewrites all test modules at every run (collection 6.3 s instead of 2.6 s
a worker on this project).
"""

from __future__ import annotations

import compileall
import os
import re
import sys
from pathlib import Path

ADR_TEST_NAME = re.compile(r"^test_adr(\d{4})_t(\d+)_")
REPO_ROOT = Path(__file__).resolve().parent.parent
ADR_DIR = REPO_ROOT / "adr"


def pytest_configure(config):
    for record in sorted(ADR_DIR.glob("[0-9][0-9][0-9][0-9]-*.md")):
        number = record.name[:4]
        config.addinivalue_line("markers", f"adr{number}: tests of {record.name}")
    if not hasattr(config, "workerinput"):  # once per run: in the process that starts any xdist workers
        _compile_for_child_interpreters()
    sys.dont_write_bytecode = False  # pytest's rewritten test modules are kept (the module docstring says why)


def pytest_collection_modifyitems(config, items):
    # A test may name a record that does not exist yet; it still gets its marker,
    # and tests/test_adr_matrix.py reports the missing record.
    registered = {line.split(":")[0] for line in config.getini("markers")}
    for item in items:
        match = ADR_TEST_NAME.match(getattr(item, "originalname", item.name))
        if match:
            marker = f"adr{match.group(1)}"
            if marker not in registered:
                config.addinivalue_line("markers", f"{marker}: tests of a record not written yet")
                registered.add(marker)
            item.add_marker(marker)


def _compile_for_child_interpreters() -> None:
    compileall.compile_dir(str(REPO_ROOT / "kernbench"), quiet=2)  # a read-only checkout is simply not compiled
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"

