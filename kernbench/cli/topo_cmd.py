"""`kernbench topo [FILE] [--json] [--draw OUT]`: summarize, dump or draw a topology."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from kernbench.cli.output_files import checked_output, staged_outputs
from kernbench.errors import KernbenchError

# The names `kernbench.topology.shipped_topology_names()` gives, read here without importing the topology
# package (its typed model takes a tenth of a second to import, which `kernbench --help` need not pay).
SHIPPED_TOPOLOGIES = Path(__file__).resolve().parent.parent / "configs" / "topology"

HELP = """Show the machine a topology file describes: counts, memories, links and
peak flops (default), every normalized value and derived fact (--json), or a
diagram of one SIP's cube mesh and the inter-SIP links (--draw OUT.png|OUT.svg)."""


def _drawing_path(text: str) -> str:
    if not text.lower().endswith((".png", ".svg")):
        raise argparse.ArgumentTypeError(f"{text!r} does not end in .png or .svg")
    return text


def register(subparsers) -> None:
    parser = subparsers.add_parser("topo", help="summarize, dump or draw a topology", description=HELP)
    parser.add_argument(
        "file",
        nargs="?",
        default=None,
        metavar="FILE",
        help=f"a topology file or a shipped name "
             f"({', '.join(sorted(p.stem for p in SHIPPED_TOPOLOGIES.glob('*.yaml')))}); default: default",
    )
    parser.add_argument("--json", action="store_true", help="print the normalized topology and derived facts as JSON")
    parser.add_argument("--draw", metavar="OUT", type=_drawing_path, help="write a diagram to OUT (.png or .svg)")
    parser.set_defaults(handler=handle)


def handle(args) -> int:
    from kernbench.topology import load_topology
    from kernbench.topology.summary import format_summary

    drawing = checked_output("--draw", args.draw) if args.draw else None  # before the work, not after it
    topology = load_topology(args.file)
    if args.json:
        print(json.dumps(topology.to_json_dict(), indent=2))
    else:
        print(format_summary(topology))
    if drawing is not None:
        # matplotlib takes about a second to import; only --draw pays for it.
        from kernbench.topology.draw import draw_topology

        with staged_outputs() as staging:
            temporary = staging.path("--draw", drawing, suffix=drawing.suffix)
            try:
                draw_topology(topology, temporary)
            except KernbenchError as error:  # its message names the file it was given: name the user's
                raise KernbenchError(str(error).replace(str(temporary), str(drawing))) from None
        print(f"kernbench: wrote {args.draw}", file=sys.stderr)
    return 0
