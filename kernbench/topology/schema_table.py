"""The topology schema as a Markdown table: one row per `SCHEMA` field, for docs/topology.md.

`docs/topology_schema.py` writes it into the page between `TABLE_START` and
`TABLE_END`; tests/topology/test_guide.py fails when the committed page's
table differs from what this renders, so the guide cannot drift from the
keys the loader accepts.
"""

from __future__ import annotations

from fractions import Fraction

from kernbench.topology.kinds import Quantity
from kernbench.topology.schema import REQUIRED, SCHEMA, Field

TABLE_START = "<!-- schema table: generated from kernbench/topology/schema.py by docs/topology_schema.py -->"
TABLE_END = "<!-- end of schema table -->"


def render_schema_table() -> str:
    """The table, `TABLE_START` to `TABLE_END` inclusive, each line ending in a newline."""
    lines = [TABLE_START, "", "| key | unit | accepts | meaning | default |", "|---|---|---|---|---|"]
    lines += [f"| `{field.path}` | {_unit(field)} | {_cell(_accepts(field))} | {_cell(field.meaning)} | "
              f"{_default(field)} |" for field in SCHEMA]
    lines += ["", TABLE_END]
    return "\n".join(lines) + "\n"


def _unit(field: Field) -> str:
    return _cell(field.kind.unit.plural) if isinstance(field.kind, Quantity) else "-"


def _accepts(field: Field) -> str:
    """What the loader's message would say it expected, less the unit, which has its own column."""
    if isinstance(field.kind, Quantity):
        return field.kind.expected.removesuffix(f" of {field.kind.unit.plural}")
    return field.kind.expected


def _default(field: Field) -> str:
    if field.default is REQUIRED:
        return "required"
    if field.default is None:
        return "none"
    if isinstance(field.default, Fraction):
        return f"`{float(field.default):g}`"
    return f"`{field.default}`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")
