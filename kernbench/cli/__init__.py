"""The `kernbench` command: one subcommand per module in this package.

Each subcommand module exposes `register(subparsers)`, which adds its parser
and sets `handler` to a function taking the parsed arguments and returning
an exit status. User errors (`KernbenchError`) are printed as their message
with exit status 2 — never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys

from kernbench.cli import run_cmd, topo_cmd
from kernbench.errors import KernbenchError

USER_ERROR_STATUS = 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kernbench",
        description="Simulated multi-SIP HBM accelerator with a torch-like API.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in (run_cmd, topo_cmd):
        module.register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    # Arguments kernbench does not know are the bench's own (`kernbench run ccl_sweep --plot out.png`);
    # only subcommands that pass them on accept them.
    args, extra = parser.parse_known_args(argv)
    if extra and not getattr(args, "accepts_extra", False):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    args.extra = extra
    try:
        return args.handler(args)
    except KernbenchError as error:
        print(f"kernbench: error: {error}", file=sys.stderr)
        return USER_ERROR_STATUS
    except BrokenPipeError:  # the reader stopped early (`kernbench run ... | head`): not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
