"""`kernbench sweep SWEEP.yaml`: one bench over many topologies, ccl settings and bench arguments.

`register(subparsers)` adds the subcommand to the `kernbench` parser (as
`kernbench/cli/run_cmd.py` does); `main(argv)` is the same command on its
own, for `python -m kernbench.sweep`.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

from kernbench.errors import KernbenchError
from kernbench.sweep.errors import SweepError

POINTS_FAILED_STATUS = 1
USER_ERROR_STATUS = 2
PLOT_FORMATS = (".png", ".svg", ".pdf")
INTERRUPTED_STATUS = 130  # what `kernbench` gives any command stopped by Ctrl-C, SIGTERM or SIGHUP
STOPPING_SIGNALS = (signal.SIGTERM, signal.SIGHUP)  # stop the sweep as Ctrl-C does

HELP = """Run a bench once per point of SWEEP.yaml — the product of its axes, each a
topology or ccl.yaml key (topology.KEY, ccl.KEY) or a bench argument (--OPTION)
— every point as its own `kernbench run` with its own derived files, then
print one table row per point (axes, status, simulated time, each
collective's busbw, the bench's metrics, wall time) and write it as CSV (and
Parquet, with pyarrow) in the output folder. Each finished point is on disk
at once; running the same command again skips the points already done. The
sweep file's format is in adr/0018-sweeps.md; kernbench/configs/sweeps/example.yaml
is a runnable one. Exit status 1 when a point
failed (the others still run), 2 for a bad sweep file, 130 on Ctrl-C."""


def register(subparsers) -> None:
    parser = subparsers.add_parser("sweep", help="run a bench over a grid of machines, ccl settings and arguments",
                                   description=HELP)
    parser.add_argument("sweep", metavar="SWEEP.yaml", help="the sweep file: bench, base files and axes")
    parser.add_argument("--out", metavar="DIR", type=Path, default=None,
                        help="output folder (default: SWEEP-results in the current folder); "
                             "a rerun into the same folder resumes")
    parser.add_argument("-j", "--jobs", metavar="N", type=int, default=None,
                        help="points run at once (default: one per core locally; every free core of the Ray cluster)")
    parser.add_argument("--executor", choices=("local", "ray"), default="local",
                        help="where points run: processes on this machine (default), or Ray tasks")
    parser.add_argument("--address", metavar="ADDR", default=None,
                        help="the Ray cluster to use (default: $RAY_ADDRESS, else a Ray started on this machine)")
    parser.add_argument("--fresh", action="store_true", help="run every point again, even those already done")
    parser.add_argument("--retry-failed", action="store_true",
                        help="run again the points whose earlier run failed, timed out or crashed")
    parser.add_argument("--dry-run", action="store_true", help="check the sweep and list its points; run nothing")
    parser.add_argument("--plot", metavar="METRIC", default=None,
                        help="draw this column of the table (e.g. all_reduce#0.busbw_gb_per_s, or a tail of it)")
    parser.add_argument("--x", metavar="AXIS", default=None, help="the axis along x of --plot")
    parser.add_argument("--hue", metavar="AXIS", default=None, help="one line per value of this axis in --plot")
    parser.add_argument("--plot-file", metavar="FILE", type=Path, default=None,
                        help="where --plot writes (default: OUT/plot-METRIC-vs-AXIS.png)")
    parser.set_defaults(handler=handle)


def handle(args) -> int:
    # Imported here, as `kernbench run` imports the simulator: the command line's signal handlers come first.
    from kernbench.sweep.derive import derive_tasks
    from kernbench.sweep.journal import Journal
    from kernbench.sweep.plot import check_metric, draw_plot, plot_path, resolve_column
    from kernbench.sweep.points import expand_points
    from kernbench.sweep.runner import run_sweep
    from kernbench.sweep.sweep_file import load_sweep
    from kernbench.sweep.table import cell_text, format_summary

    _check_options(args)
    spec = load_sweep(args.sweep)
    axis_names = [axis.name for axis in spec.axes]
    if args.plot:  # a misspelt name costs no run
        resolve_column("--x", args.x, axis_names)
        if args.hue is not None:
            resolve_column("--hue", args.hue, axis_names)
        check_metric(args.plot, axis_names, spec.bench_file.read_text(encoding="utf-8", errors="replace"))
    tasks = derive_tasks(spec, expand_points(spec))
    if args.dry_run:
        print(f"{spec.source}: {len(tasks)} points of {spec.bench}, all checked")
        for task in tasks:
            print(f"  {task.index:>4}  " + "  ".join(f"{name}={cell_text(value)}" for name, value in task.values))
        return 0
    folder = args.out if args.out is not None else Path.cwd() / f"{spec.source.stem}-results"
    if folder.exists() and not folder.is_dir():
        raise SweepError(f"--out {folder}: is a file; expected a folder (new, or an earlier run of this sweep)")
    executor = _executor(args)
    try:
        progress = run_sweep(tasks, folder, executor, fresh=args.fresh, retry_failed=args.retry_failed)
    except KeyboardInterrupt:
        done = sum(task.key in Journal(folder).latest() for task in tasks)
        print(f"kernbench sweep: interrupted; {done} of {len(tasks)} points are recorded in {folder} "
              "(run the same command again to resume)", file=sys.stderr)
        return INTERRUPTED_STATUS
    print(format_summary(progress.rows, axis_names))
    print("table: " + ", ".join(str(path) for path in progress.written))
    if args.plot:
        out = args.plot_file or plot_path(folder, args.plot, args.x)
        try:
            print(f"plot: {draw_plot(progress.rows, axis_names, args.plot, args.x, args.hue, out)}")
        except KeyboardInterrupt:  # the table is written already; only the plot is lost
            sys.stdout.flush()
            print(f"kernbench sweep: interrupted while drawing the plot {out}; the table is written "
                  f"({', '.join(str(path) for path in progress.written)}): run the same command again to draw it, "
                  "the points done are skipped", file=sys.stderr)
            return INTERRUPTED_STATUS
    missing = len(tasks) - len(progress.rows)
    failed = sum(row.get("status") != "ok" for row in progress.rows)
    return POINTS_FAILED_STATUS if failed or missing else 0


def main(argv: list[str] | None = None) -> int:
    """`kernbench sweep ARGV` as a command of its own: a bad sweep is one line and status 2."""
    parser = argparse.ArgumentParser(prog="kernbench")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["sweep", *(sys.argv[1:] if argv is None else argv)])
    previous = _signals_as_ctrl_c()
    try:
        return args.handler(args)
    except KernbenchError as error:
        print(f"kernbench: error: {error}", file=sys.stderr)
        return USER_ERROR_STATUS
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _signals_as_ctrl_c() -> dict:
    """SIGTERM and SIGHUP stop the sweep as Ctrl-C does (the `kernbench` command line does so for every command);
    returns the handlers it replaced, leaving alone a signal someone else handles or ignores."""
    if threading.current_thread() is not threading.main_thread():
        return {}

    def interrupt(_signum, _frame):
        raise KeyboardInterrupt

    return {signum: signal.signal(signum, interrupt) for signum in STOPPING_SIGNALS
            if signal.getsignal(signum) is signal.SIG_DFL}


def _check_options(args) -> None:
    if args.jobs is not None and args.jobs < 1:
        raise SweepError(f"--jobs {args.jobs}: expected at least 1")
    if args.plot and not args.x:
        raise SweepError(f"--plot {args.plot}: needs --x AXIS, the axis to draw it against")
    for flag, value in (("--x", args.x), ("--hue", args.hue), ("--plot-file", args.plot_file)):
        if value is not None and not args.plot:
            raise SweepError(f"{flag} is an option of --plot; expected --plot METRIC with it")
    if args.address is not None and args.executor != "ray":
        raise SweepError("--address is the Ray cluster's; expected --executor ray with it")
    if args.plot_file is not None:  # checked now: a plot that cannot be written must not cost the sweep
        if args.plot_file.suffix.lower() not in PLOT_FORMATS:
            raise SweepError(f"--plot-file {args.plot_file}: expected a name ending in {', '.join(PLOT_FORMATS)}")
        if not args.plot_file.resolve().parent.is_dir():
            raise SweepError(f"--plot-file {args.plot_file}: the folder {args.plot_file.resolve().parent} "
                             "does not exist; create it first")


def _executor(args):
    if args.executor == "ray":
        from kernbench.sweep.ray_executor import RayExecutor  # imports Ray, which is optional
        return RayExecutor(args.address, args.jobs)
    from kernbench.sweep.local_executor import LocalExecutor
    return LocalExecutor(args.jobs)
