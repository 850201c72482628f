"""`kernbench web [REPORT.json] [TRACE.json]`: the machine, a run's utilization, report and timeline in a browser."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

DEFAULT_PORT = 8765
MAX_PORT = 65535

HELP = """Serve a page on http://127.0.0.1:PORT/ (this machine only) that draws the
machine — SIPs, cubes, PEs and every link, with their specs on hover — and,
given the files of a run (kernbench run --json REPORT.json --trace
TRACE.json; either or both), paints each link and PE by how busy it was,
shows the run report's tables and a zoomable timeline of every op. Without
files it shows the machine of --topology. The page needs no network. Stop
the server with Ctrl-C."""


def register(subparsers) -> None:
    parser = subparsers.add_parser("web", help="show the machine and a run in a browser", description=HELP)
    parser.add_argument("files", nargs="*", metavar="FILE", type=Path,
                        help="a run report (--json) and/or a trace (--trace) of kernbench run")
    parser.add_argument("--topology", metavar="T", default=None,
                        help="topology file or shipped name to draw (default: the report's, else default)")
    parser.add_argument("--port", metavar="P", type=port_number, default=DEFAULT_PORT,
                        help=f"port on 127.0.0.1 (default {DEFAULT_PORT}; 0 picks a free one)")
    parser.set_defaults(handler=handle, web_parser=parser)


def port_number(text: str) -> int:
    """An argparse `type`: a TCP port, 0 to 65535 (0: the system picks a free one)."""
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= MAX_PORT:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a port from 0 to {MAX_PORT} (0 picks a free one)")
    return port


def handle(args) -> int:
    from kernbench.web import make_server, page_data, read_inputs, topology_for

    if len(args.files) > 2:
        args.web_parser.error("at most two files: a run report and a trace")
    files = read_inputs(args.files)
    data = page_data(topology_for(files, args.topology), files.report, files.trace)
    server = make_server(data, args.port)
    try:  # Ctrl-C is how the server ends, from the moment its address is out
        print(f"kernbench: serving http://127.0.0.1:{server.server_address[1]}/ (Ctrl-C to stop)", flush=True)
        server.serve_forever()
    except KeyboardInterrupt:
        print("kernbench: stopped", file=sys.stderr)
    finally:
        server.server_close()
    return 0
