"""`kernbench run BENCH`: run a bench's `run(torch)` on a simulated machine and report its cost."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import traceback
from pathlib import Path

from kernbench.cli.bench_loader import (Bench, BenchError, accepts_argv, description_of, is_script, load_bench_entry,
                                        resolve_bench_path, takes_argv)
from kernbench.cli.bench_options import bench_parser, positive_count
from kernbench.cli.output_files import checked_outputs, staged_outputs
from kernbench.cli.scripts import script_run
from kernbench.cli.topology_option import LinedHelpFormatter, topology_help
from kernbench.errors import KernbenchError

BENCH_FAILED_STATUS = 1

HELP = """Run BENCH (a .py file defining run(torch), a shipped bench name, or the
number `kernbench list` gives it) on a simulated machine, then print what it
cost in simulated time: per device, per link class, the busiest resources,
each kernel against the roofline and each collective's time and bus
bandwidth. The bench gets a fake `torch` namespace: tensor factories,
torch.ahbm, torch.distributed (configured by --ccl),
torch.multiprocessing.spawn and torch.spec (the topology as a nested dict).
Arguments after BENCH that kernbench does not know (or all of them after
`--`) go to the bench, if its entry point is run(torch, argv); `kernbench run
BENCH --help` lists them."""


def register(subparsers) -> None:
    # No abbreviations: arguments kernbench does not know are the bench's, and a bench's `--n 64` must reach it
    # rather than be read as kernbench's `--no-memcheck`.
    parser = subparsers.add_parser("run", help="run a bench", description=HELP, add_help=False, allow_abbrev=False,
                                   formatter_class=LinedHelpFormatter)
    parser.add_argument("-h", "--help", action="store_true",
                        help="show this help, or with BENCH the bench's own options, and exit")
    parser.add_argument("bench", metavar="BENCH", nargs="?",
                        help="path to a bench .py file, a shipped bench name, or its number in `kernbench list`")
    parser.add_argument("--topology", metavar="F", default=None,
                        help=topology_help("topology file or shipped name (default: default):"))
    parser.add_argument("--ccl", metavar="F", default=None,
                        help="collective configuration (algorithm, IPCQ parameters, world size); "
                             "default: the shipped ccl/ccl.yaml")
    parser.add_argument("--json", metavar="FILE", type=Path, help="also write the report as JSON to FILE")
    parser.add_argument("--trace", metavar="FILE", type=Path,
                        help="write a Perfetto/Chrome trace of every op to FILE")
    parser.add_argument("--timing-only", action="store_true",
                        help="skip the data work (copied and computed values); times are unchanged")
    parser.add_argument("--progress", action="store_true",
                        help="show simulated time, events and kernel programs done on stderr while the run goes "
                             "(the default when stderr is a terminal)")
    parser.add_argument("--strict-hazards", action="store_true",
                        help="stop at the first data hazard (a read racing a write) instead of reporting it")
    parser.add_argument("--seed", type=int, default=0, help="seed of torch.manual_seed at start (default 0)")
    parser.add_argument("--no-memcheck", dest="memcheck", action="store_false",
                        help="do not hold a kernel's loads and stores to the tensor each pointer came from "
                             "(an access that runs into another tensor then reads or writes it, as on a GPU); "
                             "accesses outside every tensor still fail")
    parser.add_argument("--nproc-per-node", "--nproc_per_node", dest="nproc_per_node", metavar="N",
                        type=positive_count, default=None,
                        help="for a script (a file with no top-level run): run it as torchrun does, once on each "
                             "of N ranks with torchrun's environment (default 1)")
    parser.add_argument("--spmd", action=argparse.BooleanOptionalAction, default=True,
                        help="with --timing-only, simulate the work of a spawn's ranks once where they do the same "
                             "work on SIPs alike, and pass it on to the others (the same times; --no-spmd "
                             "simulates every rank)")
    parser.add_argument("--max-programs", metavar="N", type=positive_count, default=None,
                        help="the most programs one kernel launch may have (default: what a minute or two of "
                             "simulation runs); a larger grid is refused at its launch, saying the default")
    parser.set_defaults(handler=handle, accepts_extra=True, run_parser=parser)


def handle(args) -> int:
    from kernbench.topology.loader import resolve_topology_path

    if args.help:
        print(bench_help(args.bench) if args.bench else args.run_parser.format_help(), end="")
        return 0
    if args.bench is None:
        args.run_parser.error("the following arguments are required: BENCH")
    # Outputs are checked before anything slow happens, so a path that cannot be written costs no run.
    outputs = checked_outputs({"--json": args.json, "--trace": args.trace},
                              inputs={"bench file": _bench_file(args.bench),
                                      "--topology file": resolve_topology_path(args.topology), "--ccl file": args.ccl})
    resolve_bench_path(args.bench)  # a bench that is not there is one line before the simulator loads
    from kernbench.runtime_api.launch.triton_driver import triton_driver  # with the simulator: slow
    from kernbench.topology import load_topology

    topology = load_topology(args.topology)
    with triton_driver(topology):  # Triton code may ask its driver about the device, even at import
        return _run(args, outputs, topology)


def _run(args, outputs: dict[str, Path], topology) -> int:
    """Load the bench, run it on a new session, report; the exit status."""
    from kernbench.cli.attempts import run_exactly
    from kernbench.report import format_report, run_report
    from kernbench.report.progress import ProgressLine
    from kernbench.runtime_api.namespace.spawn import ProcessExitedException, SpawnException
    from kernbench.session import Session

    path = resolve_bench_path(args.bench)
    if not is_script(path) and args.nproc_per_node is not None:
        raise BenchError(f"{path}: --nproc-per-node runs a script (a file with no top-level run) on that many "
                         "ranks; this bench defines run(torch) and starts its own workers")
    limits = {} if args.max_programs is None else {"max_programs": args.max_programs}

    def attempt(spmd_skip):
        if is_script(path):
            run, bench_args = script_run(path, args.nproc_per_node or 1), (args.extra,)
        else:
            bench = load_bench_entry(args.bench)  # a fresh module each attempt: its globals as the first saw them
            bench_args = (args.extra,) if takes_argv(bench.run, args.bench, args.extra) else ()
            if bench.add_arguments is not None:
                bench_parser(bench.name, bench.add_arguments).parse_args(args.extra)  # a bad option costs no run
            run = bench.run
        session = Session(topology, ccl=args.ccl, timing_only=args.timing_only, seed=args.seed,
                          strict_hazards=args.strict_hazards, memcheck=args.memcheck, spmd=args.spmd,
                          spmd_skip=spmd_skip, **limits)
        args.interrupts.engine = session.engine
        on_terminal = sys.stderr.isatty()
        progress = (ProgressLine(session.ctx, sys.stderr, interval_s=0.5 if on_terminal else 2.0)
                    if args.progress or on_terminal else contextlib.nullcontext())
        with progress:
            session.run(run, session.torch, *bench_args)
        return session

    try:
        session = run_exactly(attempt)
    except ProcessExitedException as error:
        print(f"kernbench: {error}", file=sys.stderr)  # the ranks' own sys.exit: one line, as PyTorch's
        return BENCH_FAILED_STATUS
    except SpawnException as error:
        if error.user_errors_only:
            raise
        print(error, file=sys.stderr)  # a rank's own bug: its traceback is the message
        return BENCH_FAILED_STATUS
    except (KernbenchError, BrokenPipeError):
        raise
    except Exception as error:
        traceback.print_exception(error)
        return BENCH_FAILED_STATUS
    report = run_report(session.ctx)
    print()
    print(format_report(report))
    _write_outputs(outputs, report, session.ctx.machine.oplog)
    return 0


def bench_help(name: str) -> str:
    """`kernbench run NAME --help`: the bench's description, usage and its own options."""
    from kernbench.runtime_api.launch.triton_driver import triton_driver  # a bench may import Triton code
    from kernbench.topology import load_topology

    with triton_driver(load_topology(None)):
        bench = load_bench_entry(name)
    return format_bench_help(bench)


def format_bench_help(bench: Bench) -> str:
    description = description_of(bench.path) or None
    prog = f"kernbench run {bench.name}"
    if bench.add_arguments is None:
        own = (f"{bench.name} reads arguments (its run takes argv) but does not declare them with "
               "add_arguments(parser); its docstring may say which" if accepts_argv(bench.run)
               else f"{bench.name} takes no options of its own")
        return (f"usage: {prog} [kernbench run options]\n\n" + (f"{description}\n\n" if description else "")
                + f"{own}; `kernbench run --help` lists kernbench's.\n")
    parser = bench_parser(prog, bench.add_arguments, description=description)
    parser.usage = f"{prog} [kernbench run options] {parser.format_usage().split(prog, 1)[1].strip()}"
    parser.epilog = ("kernbench's own options (--topology, --ccl, --timing-only, --json, --trace, --seed, ...) "
                     "may come before or after these; `kernbench run --help` lists them.")
    for group in parser._action_groups:  # argparse's titles are "options"/"positional arguments": name the bench
        if group.title in ("options", "optional arguments"):
            group.title = f"options of {bench.name}"
    return parser.format_help()


def _bench_file(bench: str) -> Path | None:
    try:
        return resolve_bench_path(bench)
    except KernbenchError:
        return None  # load_bench says what is wrong with it, after the outputs are checked


def _write_outputs(outputs: dict[str, Path], report: dict, oplog) -> None:
    """Write every output to a temporary file, then put them all in place: all of them, or none."""
    from kernbench.sim_engine import write_chrome_trace

    with staged_outputs() as staging:
        if "--json" in outputs:
            with staging.file("--json", outputs["--json"]) as file:
                file.write(json.dumps(report, indent=2) + "\n")
        if "--trace" in outputs:
            with staging.file("--trace", outputs["--trace"]) as file:
                write_chrome_trace(oplog, file)
