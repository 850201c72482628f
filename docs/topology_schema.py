"""Write the schema table of docs/topology.md from the code: `python docs/topology_schema.py`.

The table is the part of the page between the markers
`kernbench.topology.schema_table` renders; the text around it is written by
hand and left as it is. tests/topology/test_guide.py fails when the
committed table differs from what the code generates.
"""

from pathlib import Path

from kernbench.topology.schema_table import TABLE_END, TABLE_START, render_schema_table

PAGE = Path(__file__).resolve().parent / "topology.md"

if __name__ == "__main__":
    text = PAGE.read_text()
    before, _, rest = text.partition(TABLE_START)
    _, _, after = rest.partition(TABLE_END + "\n")
    PAGE.write_text(before + render_schema_table() + after)
