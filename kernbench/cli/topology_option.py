"""The `--topology` option: the shipped machines, one line each, in the help of every command that takes one.

`SHIPPED` describes each file of `kernbench/configs/topology/` in one line
(tests/cli/test_cli_shipped_topologies.py holds it to the shipped files and
to the README's table, tests/topology/test_guide.py to docs/topology.md's). It is written here, not read from the files, so
`kernbench run --help` neither reads YAML nor imports the topology package.
"""

from __future__ import annotations

import argparse
import textwrap

# In the order a newcomer meets them: the accelerator machines, then the real GPUs they are checked against.
# Each fits beside its name in the help of any command at 80 columns.
SHIPPED = {
    "default": "4 SIPs in a ring, 2x2 HBM3 cubes x 8 PEs",
    "single_sip": "one SIP of the default machine, alone",
    "large": "32 SIPs on a switch, 4x4 HBM3E cubes",
    "h100": "one NVIDIA H100 SXM5, its 132 SMs as PEs",
    "h200x4": "4 NVIDIA H200 SXM GPUs behind NVSwitch",
    "h200x8": "8 NVIDIA H200 SXM GPUs behind NVSwitch",
}


def topology_help(what: str) -> str:
    """`what` (the option's first line), then one line per shipped machine: name and description."""
    width = max(map(len, SHIPPED)) + 2
    return "\n".join([what, *(f"{name:<{width}}{description}" for name, description in SHIPPED.items())])


class LinedHelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, except that an option's help keeps its own lines (each wrapped alone if too long)."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        if "\n" not in text:
            return super()._split_lines(text, width)
        return [wrapped for line in text.splitlines() for wrapped in textwrap.wrap(line, width) or [""]]
