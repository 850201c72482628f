"""The `kernbench` command: one subcommand per row of `COMMANDS`.

Each subcommand module exposes `register(subparsers)`, which adds its parser
and sets `handler` to a function taking the parsed arguments and returning
an exit status. `COMMANDS` holds the modules, in the order `kernbench
--help` lists them; a command that lives outside this package (`kernbench
sweep`, in `kernbench.sweep`) is a row like any other. User errors
(`KernbenchError`) are printed as their message with exit status 2 — never
a traceback. SIGINT, SIGTERM and SIGHUP end any command
with one line and status 130 (`interrupts.py`). Subcommand modules import
the simulator itself inside their handlers, so the signal handlers are in
place before the slow imports (triton) start.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys

from kernbench.cli import list_cmd, probe_cmd, run_cmd, topo_cmd, web_cmd
from kernbench.cli.interrupts import INTERRUPTED_STATUS, Interrupts
from kernbench.cli.version_option import VersionAction
from kernbench.errors import KernbenchError
from kernbench.sweep import command as sweep_cmd

USER_ERROR_STATUS = 2

# Each module's top level imports nothing slow: the simulator is imported inside the handlers.
COMMANDS = (
    run_cmd,    # kernbench run BENCH
    list_cmd,   # kernbench list [PATH]
    sweep_cmd,  # kernbench sweep SWEEP.yaml (ADR 0018)
    topo_cmd,   # kernbench topo [FILE]
    probe_cmd,  # kernbench probe SRC DST
    web_cmd,    # kernbench web [REPORT.json] [TRACE.json]
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kernbench",
        description="Simulated multi-SIP HBM accelerator with a torch-like API.",
    )
    parser.add_argument("--version", action=VersionAction)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in COMMANDS:
        module.register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    with Interrupts() as interrupts:
        try:
            parser = build_parser()
            # Arguments kernbench does not know are the bench's own (`kernbench run ccl_sweep --plot out.png`);
            # only subcommands that pass them on accept them.
            args, extra = parser.parse_known_args(argv)
            if "--" in extra:  # `kernbench run BENCH -- --size 8`: the separator is the shell convention, not an argument
                extra.remove("--")
            if extra and not getattr(args, "accepts_extra", False):
                parser.error(f"unrecognized arguments: {' '.join(extra)}")
            args.extra = extra
            args.interrupts = interrupts
            return args.handler(args)
        except KernbenchError as error:
            print(f"kernbench: error: {error}", file=sys.stderr)
            return USER_ERROR_STATUS
        except BrokenPipeError:  # the reader stopped early (`kernbench run ... | head`): not an error of ours
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 0
        except KeyboardInterrupt:
            with contextlib.suppress(OSError):
                sys.stdout.flush()  # what the bench printed comes before the line that ends it
            print(f"kernbench: {interrupts.line()}", file=sys.stderr)
            return INTERRUPTED_STATUS
