"""`kernbench list [PATH]`: the benches there are to run, each with its description and its options."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

from kernbench.cli.bench_loader import (SHIPPED_BENCHES, BenchError, accepts_argv, benches_in, description_of,
                                        load_bench_entry)
from kernbench.cli.bench_options import bench_parser, usage_words
from kernbench.errors import KernbenchError

HELP = """List the shipped benches, numbered as `kernbench run N` takes them, and
the benches in PATH (a folder; each .py file there that defines run), each
with the first line of its docstring and the options it takes. Benches are
imported to read their options, as `kernbench run` would import them."""

WIDTH = 100  # when the terminal does not say


def register(subparsers) -> None:
    parser = subparsers.add_parser("list", help="list the shipped benches (and those in a folder)", description=HELP)
    parser.add_argument("path", nargs="?", metavar="PATH", type=Path, default=None,
                        help="also list the benches in this folder")
    parser.set_defaults(handler=handle)


def handle(args) -> int:
    if args.path is not None and not args.path.is_dir():
        raise BenchError(f"{args.path}: not a folder; expected a folder of bench .py files")
    from kernbench.runtime_api.launch.triton_driver import triton_driver  # benches may import Triton code
    from kernbench.topology import load_topology

    shipped = benches_in(SHIPPED_BENCHES)
    found = benches_in(args.path) if args.path is not None else []
    width = shutil.get_terminal_size((WIDTH, 24)).columns
    with triton_driver(load_topology(None)):
        rows = [(str(number), path.stem, _entry(path, path.stem)) for number, path in enumerate(shipped, 1)]
        print("shipped benches (kernbench run NAME or N):")
        print(_format(rows, width))
        if args.path is not None:
            print(f"\nbenches in {args.path} (kernbench run PATH):")
            if found:
                print(_format([("", str(path), _entry(path, str(path))) for path in found], width))
            else:
                print("  none (no .py file there defines run)")
    print("\n`kernbench run BENCH --help` shows a bench's options in full.")
    return 0


def _entry(path: Path, shown: str) -> tuple[str, str]:
    """(description, options) of one bench; a bench that cannot be imported says why instead of its options."""
    description = description_of(path) or "(no docstring)"
    try:
        bench = load_bench_entry(str(path))
    except KernbenchError as error:
        return description, f"cannot be loaded: {error}"
    if bench.add_arguments is None:
        return description, "options: not declared (run takes argv)" if accepts_argv(bench.run) else ""
    try:
        return description, f"options: {usage_words(bench_parser(bench.name, bench.add_arguments))}"
    except Exception as error:  # the bench's own add_arguments failed: say so, list the rest
        return description, f"cannot read its options: {type(error).__name__}: {error}"


# The narrowest column a description is wrapped into beside the names; below it (a folder's long paths on a
# narrow terminal) each description goes under its name instead. Words, paths above all, are never cut.
MIN_DESCRIPTION_WIDTH = 30


def _format(rows: list[tuple[str, str, tuple[str, str]]], width: int) -> str:
    number_width = max(len(number) for number, _, _ in rows)
    name_width = max(len(name) for _, name, _ in rows)
    beside = width - (2 + number_width + 2 + name_width + 2) >= MIN_DESCRIPTION_WIDTH
    indent = " " * (2 + number_width + 2 + name_width + 2 if beside else 6)
    lines = []
    for number, name, (description, options) in rows:
        head = f"  {number:>{number_width}}  {name:<{name_width}}  "
        if not beside:
            lines.append(head.rstrip())
            head = indent
        lines += textwrap.wrap(description, width, initial_indent=head, subsequent_indent=indent,
                               break_long_words=False) or [head.rstrip()]
        if options:
            lines += textwrap.wrap(options, width, initial_indent=indent, subsequent_indent=indent + "  ",
                                   break_on_hyphens=False, break_long_words=False)  # a path stays whole
    return "\n".join(lines)
