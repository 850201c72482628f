"""A bench's own options: declared once by the bench, shown by `kernbench list` and `kernbench run NAME --help`.

A bench that takes options defines, beside `run(torch, argv)`, a module-level

    def add_arguments(parser):
        parser.add_argument("--plot", metavar="OUT.png", help="...")

which adds them to an `argparse.ArgumentParser` (argparse's own vocabulary:
`add_argument`, groups, types, choices). The command line builds that
parser to print the bench's help and usage and to check its arguments
before the simulator starts; the bench builds the same parser inside `run`
(`parse_bench_options`) to read them, so `run(torch, argv)` stays callable
from a script or a test with a plain list of words. A bad argument is one
`BenchUsageError` line — `NAME: message (usage: NAME [--plot OUT.png] ...)`
— never argparse's exit.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence

from kernbench.errors import KernbenchError


class BenchUsageError(KernbenchError):
    """An argument a bench does not take or cannot use: one line with the bench's usage."""


class BenchArgumentParser(argparse.ArgumentParser):
    """An argument parser whose errors are one-line `KernbenchError`s (of `error_type`), not an exit."""

    def __init__(self, *args, error_type: type[KernbenchError] = BenchUsageError, **kwargs):
        super().__init__(*args, **kwargs)
        self._error_type = error_type

    def error(self, message):
        raise self._error_type(f"{self.prog}: {message} ({' '.join(self.format_usage().split())})")


def positive_count(text: str) -> int:
    """An argparse `type` for a whole number of at least 1 (a size, a count of workers)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a positive whole number")
    return value


def positive_counts(text: str) -> list[int]:
    """An argparse `type` for comma-separated whole numbers of at least 1 (the sizes a bench sweeps)."""
    return [positive_count(part) for part in text.split(",")]


def switches(text: str) -> list[bool]:
    """An argparse `type` for an off/on option's settings, in the order given: off, on or off,on."""
    choices = {"off": False, "on": True}
    if any(part not in choices for part in text.split(",")):
        raise argparse.ArgumentTypeError(f"{text!r}: expected off, on or off,on")
    return [choices[part] for part in text.split(",")]


def add_layer_arguments(parser: argparse.ArgumentParser) -> None:
    """A transformer layer's shape, its tensor-parallel sizes and sequence parallelism, as the layer benches
    (`tp_layer`, `dtensor_tp`) take them."""
    parser.add_argument("--hidden", type=positive_count, default=512, help="hidden size (default 512)")
    parser.add_argument("--heads", type=positive_count, default=8, help="attention heads (default 8)")
    parser.add_argument("--seq", type=positive_count, default=256, help="sequence length (default 256)")
    parser.add_argument("--batch", type=positive_count, default=1, help="micro-batch size (default 1)")
    parser.add_argument("--tp", type=positive_counts, default=None,
                        help="tensor-parallel sizes, comma-separated (default: every divisor)")
    parser.add_argument("--sp", type=switches, default=[False, True], help="sequence parallelism: off, on, or off,on")


def add_workers_argument(parser: argparse.ArgumentParser) -> None:
    """`--workers N` of the collective benches: above the SIP count, N spawned workers share the PE ranks out."""
    parser.add_argument("--workers", metavar="N", type=positive_count, default=1,
                        help="with more ranks than SIPs: N spawned workers, each driving world/N PE ranks of its own "
                             "SIP (default 1: every rank a PE of SIP 0)")


def check_workers(bench: str, workers: int, ranks: int, sips: int, error_type: type[KernbenchError]) -> None:
    """`--workers` above one is for worlds above the SIP count; where the ranks fit the SIPs it is refused, not
    ignored."""
    if workers > 1 and ranks <= sips:
        raise error_type(f"{bench}: --workers {workers}: the {ranks} ranks fit the {sips} SIPs, a worker each; "
                         "--workers shares PE ranks out above the SIP count (a ccl file's world_size)")


def bench_parser(name: str, add_arguments: Callable, *, error_type: type[KernbenchError] = BenchUsageError,
                 description: str | None = None) -> BenchArgumentParser:
    """The parser of bench `name`'s options (no `-h`: `kernbench run NAME --help` answers for it)."""
    parser = BenchArgumentParser(prog=name, add_help=False, description=description, error_type=error_type)
    add_arguments(parser)
    return parser


def parse_bench_options(name: str, add_arguments: Callable, argv: Sequence[str], *,
                        error_type: type[KernbenchError] = BenchUsageError) -> argparse.Namespace:
    """`argv` parsed by the options `add_arguments` declares; a bad one raises `error_type` (one line)."""
    return bench_parser(name, add_arguments, error_type=error_type).parse_args(list(argv))


def usage_words(parser: argparse.ArgumentParser) -> str:
    """The options part of the parser's usage line: `[--plot OUT.png] [--dtype {f16,f32}]`."""
    usage = " ".join(parser.format_usage().split())
    return usage.removeprefix("usage:").strip().removeprefix(parser.prog).strip()
