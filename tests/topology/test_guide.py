"""ADR 0002, the guide: docs/topology.md's table is the schema, its minimal file loads, a partial file points to it."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from kernbench.cli.topology_option import SHIPPED
from kernbench.topology import load_topology, shipped_topology_names
from kernbench.topology.schema import GUIDE, REQUIRED, SCHEMA
from kernbench.topology.schema_table import TABLE_END, TABLE_START, render_schema_table
from tests.cli import REPO_ROOT, run_kernbench_in_process

PAGE = REPO_ROOT / GUIDE


def section(title: str) -> str:
    """The text of the page's `## title` section."""
    return PAGE.read_text().split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def minimal_file(tmp_path: Path) -> Path:
    text = re.search(r"```yaml\n(.*?)```", section("A minimal file"), re.S).group(1)
    path = tmp_path / "minimal.yaml"
    path.write_text(text)
    return path


def test_adr0002_t45_the_guides_key_table_is_what_the_schema_generates():
    text = PAGE.read_text()
    committed = text[text.index(TABLE_START):text.index(TABLE_END) + len(TABLE_END) + 1]
    assert committed == render_schema_table(), \
        "docs/topology.md's table is stale: run python docs/topology_schema.py"
    rows = [line for line in committed.splitlines() if line.startswith("| `")]
    assert [row.split("`")[1] for row in rows] == [field.path for field in SCHEMA]
    assert [row.endswith("| required |") for row in rows] == [field.default is REQUIRED for field in SCHEMA]


def test_adr0002_t46_the_guides_minimal_file_loads_with_exactly_the_required_keys(tmp_path):
    path = minimal_file(tmp_path)
    data = yaml.safe_load(path.read_text())

    def given(dotted: str) -> bool:
        node = data
        for part in dotted.split("."):
            if not isinstance(node, dict) or part not in node:
                return False
            node = node[part]
        return True

    assert {field.path for field in SCHEMA if given(field.path)} == \
           {field.path for field in SCHEMA if field.default is REQUIRED}
    minimal, default = load_topology(path).to_json_dict(), load_topology("default").to_json_dict()
    assert {**minimal, "source": None} == {**default, "source": None}, "the page says it is the default machine"


def test_adr0002_t47_a_partial_file_is_one_line_that_points_to_the_guide(tmp_path):
    partial = tmp_path / "my.yaml"
    partial.write_text(minimal_file(tmp_path).read_text().split("sip:\n")[0])  # the system section alone
    result = run_kernbench_in_process("topo", "my.yaml", cwd=tmp_path)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == ("kernbench: error: my.yaml:1: sip: missing key; expected a mapping with keys "
                             f"cube_mesh, noc, l2, default_placement, kernel_start_ns; see {GUIDE} for every key "
                             "and a minimal file\n")
    assert f"\n{result.stderr}```" in section("When a file is refused"), "the page shows the message as it is"


def test_adr0002_t48_the_guides_table_of_shipped_machines_names_every_shipped_file():
    rows = re.findall(r"^\| `(\w+)` \| (.+) \|$", section("A variant of a shipped machine"), re.M)
    assert sorted(name for name, _ in rows) == sorted(shipped_topology_names())
    assert dict(rows) == SHIPPED, "each row says what `kernbench run --help` says"
