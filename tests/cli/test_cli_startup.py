"""ADR 0019: the command line starts without the simulator, and the package metadata is current."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from importlib.metadata import version

import pytest

from tests.cli import REPO_ROOT, run_kernbench

PROBE = """
import sys
from kernbench.cli import main
try:
    status = main(sys.argv[1:])
except SystemExit as stop:
    status = stop.code
heavy = sorted(name for name in ("triton", "numpy", "matplotlib", "kernbench.session") if name in sys.modules)
print("imported:", ",".join(heavy) or "none", "status:", status, file=sys.stderr)
"""


def imported_by(*args: str) -> str:
    path = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    result = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": path})
    return result.stderr.strip().splitlines()[-1]


def test_adr0019_t16_help_and_topo_do_not_import_triton_or_the_simulator():
    assert imported_by("--help") == "imported: none status: 0"
    assert imported_by("topo") == "imported: none status: 0"
    assert imported_by("probe", "--help") == "imported: none status: 0"


def test_adr0019_t17_license_is_an_spdx_expression_and_the_page_is_package_data():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11 and later
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    assert project["project"]["license"] == "Apache-2.0"
    assert any(requirement.startswith("setuptools>=77") for requirement in project["build-system"]["requires"])
    assert "web/static/*" in project["tool"]["setuptools"]["package-data"]["kernbench"]
    from kernbench.web.server import STATIC, static_file

    for name, _ in STATIC.values():
        assert static_file(name), name
    assert {"pytest", "hypothesis"} <= {req.split(">")[0].split("=")[0] for req in
                                         project["project"]["optional-dependencies"]["test"]}


@pytest.mark.quick
def test_adr0019_t35_version_prints_the_installed_packages_version_and_exits_0(tmp_path):
    result = run_kernbench("--version", cwd=tmp_path)
    assert result.returncode == 0 and result.stderr == ""
    assert result.stdout == f"kernbench {version('kernbench')}\n"
    assert re.fullmatch(r"kernbench \d+\.\d+\.\d+\n", result.stdout)
