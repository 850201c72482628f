"""ADR 0019: every shipped topology is one line in `--topology`'s help and one row of the README's table."""

from __future__ import annotations

import contextlib
import re

import pytest

from kernbench.cli import main
from kernbench.cli.topology_option import SHIPPED
from kernbench.topology import shipped_topology_names
from tests.cli import REPO_ROOT


@pytest.mark.parametrize("command", ["run", "probe"])
def test_adr0019_t33_topology_help_names_each_shipped_machine_on_one_line(command, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    with contextlib.suppress(SystemExit):  # argparse's help exits; `run --help` returns
        main([command, "--help"])
    help_text = capsys.readouterr().out
    assert sorted(SHIPPED) == sorted(shipped_topology_names())
    for name, description in SHIPPED.items():
        assert re.search(rf"^ +{name} +{re.escape(description)}$", help_text, re.M), f"{name} in:\n{help_text}"


def test_adr0019_t34_the_readmes_table_has_a_row_for_each_shipped_topology():
    rows = re.findall(r"^\| `(\w+)` \| (.+) \|$", (REPO_ROOT / "README.md").read_text(), re.M)
    assert {name: description for name, description in rows if name in shipped_topology_names()} == SHIPPED
