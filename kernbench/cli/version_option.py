"""`kernbench --version`: the installed package's version, as pip and importlib.metadata know it."""

from __future__ import annotations

import argparse
import sys

from kernbench.errors import KernbenchError


class VersionAction(argparse.Action):
    """Print `kernbench X.Y.Z` on stdout and exit 0.

    The version is looked up only when asked: importlib.metadata scans the
    installed distributions, which every other command need not pay for.
    """

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="print kernbench's version and exit")

    def __call__(self, parser, namespace, values, option_string=None):
        from importlib.metadata import PackageNotFoundError, version

        try:
            installed = version("kernbench")
        except PackageNotFoundError:
            raise KernbenchError("kernbench is not installed, so it has no version: pip install -e . "
                                 "from the repository root") from None
        print(f"kernbench {installed}", file=sys.stdout)
        parser.exit(0)
