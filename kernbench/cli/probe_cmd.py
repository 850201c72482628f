"""`kernbench probe SRC DST`: simulated latency and bandwidth between two points, beside the closed form."""

from __future__ import annotations

import argparse
import json
import sys

from kernbench.cli.output_files import checked_output, staged_outputs
from kernbench.cli.topology_option import LinedHelpFormatter, topology_help

DEFAULT_SIZES = "64,1K,16K,256K,4M,64M"
PLOT_SUFFIXES = (".png", ".svg", ".pdf")

HELP = """Move bytes from SRC to DST on the simulated machine, one transfer at a
time, and print the route (every link crossed, with its bandwidth and
latency), the latency, and the time and bandwidth for each size next to the
closed form: sum of the hops' latencies + bytes / the slowest hop's
bandwidth. Endpoints: host, sipN (its cube 0 HBM, where tensors sit by
default), sipN.hbm, sipN.cubeC (its HBM), sipN.cubeC.sram,
sipN.cubeC.peP (the PE's TCM, moved by the PE's own DMA engines) and
sipN.cubeC.peP.tcm (the TCM, moved by the copy engine). --concurrent adds
the makespan of k transfers issued together."""


def _plot_path(text: str) -> str:
    if not text.lower().endswith(PLOT_SUFFIXES):
        raise argparse.ArgumentTypeError(f"{text!r} does not end in {', '.join(PLOT_SUFFIXES)}")
    return text


def _counts(text: str) -> list[int]:
    try:
        counts = [int(word) for word in text.split(",")]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected whole numbers of at least 1, e.g. 2,4,8")
    return counts


def register(subparsers) -> None:
    parser = subparsers.add_parser("probe", help="latency and bandwidth between two points of the machine",
                                   description=HELP, formatter_class=LinedHelpFormatter)
    parser.add_argument("src", metavar="SRC", help="where the bytes start: host, sip1, sip0.cube3.pe5, ...")
    parser.add_argument("dst", metavar="DST", help="where they go, in the same forms")
    parser.add_argument("--bytes", metavar="SIZES", default=DEFAULT_SIZES,
                        help=f"comma-separated sizes, K/M/G binary suffixes allowed (default {DEFAULT_SIZES})")
    parser.add_argument("--topology", metavar="T", default=None,
                        help=topology_help("topology file or shipped name (default: default):"))
    parser.add_argument("--concurrent", metavar="K,...", type=_counts, default=[],
                        help="also issue k transfers together for each k, and print each makespan")
    parser.add_argument("--json", action="store_true", help="print the result as JSON instead of a table")
    parser.add_argument("--plot", metavar="OUT.png", type=_plot_path,
                        help="draw bandwidth against size into OUT (.png, .svg or .pdf)")
    parser.set_defaults(handler=handle)


def handle(args) -> int:
    plot = checked_output("--plot", args.plot) if args.plot else None  # before the work, not after it
    from kernbench.probe import parse_endpoint, parse_sizes, probe
    from kernbench.probe.text import format_probe
    from kernbench.topology import load_topology

    topology = load_topology(args.topology)
    src, dst = parse_endpoint(args.src, topology), parse_endpoint(args.dst, topology)
    result = probe(topology, src, dst, parse_sizes(args.bytes), args.concurrent)
    print(json.dumps(result.as_dict(), indent=2) if args.json else format_probe(result))
    if plot is not None:
        from kernbench.probe.plot import draw_probe

        with staged_outputs() as staging:
            draw_probe(result, staging.path("--plot", plot, suffix=plot.suffix))
        print(f"kernbench: wrote {args.plot}", file=sys.stderr)
    return 0
