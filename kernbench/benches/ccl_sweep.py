"""An nccl-tests-style sweep: every algorithm of ccl.yaml × six collectives × message sizes.

    kernbench run benches/ccl_sweep.py [--topology F] [--ccl F] [--timing-only]
        [--algorithms ring,tree,...] [--collectives all_reduce,all_gather,reduce_scatter,broadcast,reduce,all_to_all]
        [--min-bytes 8] [--max-bytes 64M] [--factor 4] [--dtype f16|bf16|f32] [--plot OUT.png] [--workers N]

By default it runs all six collectives — all_reduce, all_gather,
reduce_scatter, broadcast, reduce and all_to_all — with every algorithm
ccl.yaml lists, at every size from 8 B by 4 up to 8 MiB (64 MiB under
`--timing-only`): with the shipped ccl.yaml, a few hundred collectives
and some seconds to a minute of host time; `--collectives` and
`--algorithms` narrow it. For each algorithm the bench calls
`init_process_group(backend="ahbm", pg_options={"algorithm": name})`, runs
every collective at every size, then `destroy_process_group()`. It prints
one table per algorithm and collective, one row per size, in nccl-tests'
columns:

    size (B), count (elements), type, redop, time (us), algbw (GB/s), busbw (GB/s), #wrong

and ends each table with nccl-tests' `# Avg bus bandwidth` over its rows.
The options go after the bench's path; `add_arguments` declares them, so
`kernbench run ccl_sweep --help` and `kernbench list` show them, and a bad
one is a one-line error (`SweepUsageError`, exit status 2) that repeats
the usage.

Decisions, and why:

- **Sizes** are `min·factor^k` up to `max`, as nccl-tests' `-b/-e/-f` make
  them, and `max` itself when the steps jump over it (so the defaults, 8 B
  to 64 MiB by 4, end at 32 MiB and 64 MiB). Sizes take
  K/M/G suffixes, in binary units. `size` is the per-rank buffer nccl-tests
  and the run report name — the tensor for all_reduce, the gathered output
  for all_gather, the input for reduce_scatter — and `count = size /
  itemsize` of it. For all_gather and reduce_scatter the count is rounded
  down to a multiple of the world size (each rank's share must be whole);
  a size whose count rounds to 0 is left out.
- **Default --max-bytes.** 64 MiB under `--timing-only`; 8 MiB when values are
  computed (busbw has reached its plateau by then on the shipped machines),
  since computing and checking the values of the larger sizes costs several
  times the host time of all the smaller ones together. The bench prints a
  note when it lowers the bound; an explicit `--max-bytes` is always obeyed.
- **Every algorithm runs every collective.** A collective the algorithm's
  module (ccl.yaml's `module`) has no function for runs its fallback, as
  `torch.distributed` does (adr/0010: ring for the reductions, gathers,
  broadcast and reduce, direct for all-to-all); a note before the table says
  so, and the rows keep the configured algorithm's name. broadcast and reduce
  use rank 0 as root; all-to-all is `all_to_all_single` with equal splits.
- **Ranks.** One worker per rank when the world size fits the SIPs. With more
  ranks than SIPs, ranks are PEs of SIP 0 and the single worker (rank 0)
  holds each tensor spread over exactly p PEs, chunk r of its last dimension
  being rank r's buffer — the placement `ccl_allreduce` uses. `--workers N`
  spreads them instead: N spawned workers, worker w driving p/N PE ranks of
  SIP w the same way (adr/0012), which is what the `hierarchical`
  algorithm needs to run its own schedule (several ranks on each of several
  SIPs); worker 0 times the calls.
- **Time** is rank 0's, taken as PyTorch code would: after a barrier (so every
  rank starts together and no earlier work overlaps), a `torch.ahbm.Event`
  recorded before and after the call on rank 0's stream; `elapsed_time`
  covers exactly the collective, and equals the duration the run report's
  collective record gives. One iteration per size: the simulation is
  deterministic, so nccl-tests' warm-up and averaging would change nothing.
  algbw = size / time; busbw = algbw × `kernbench.ccl.records.bus_factor`
  (all_reduce 2(n−1)/n, all_gather and reduce_scatter (n−1)/n).
- **Values.** Rank r's input element i is ((i + 3r) mod 7) − 3: small
  integers, so every partial sum is an integer of magnitude at most 3p,
  exact in bf16 up to p = 85 ranks (in f16 and f32 far beyond), whatever
  order an algorithm adds in; a result is right only if it is bit-equal to
  numpy's. `#wrong`
  counts the elements that differ, summed over ranks (nccl-tests' column);
  it is `n/a` under `--timing-only`, where values are not computed. A sweep
  with any wrong element fails (exit status 1) after printing every row.
- **--plot OUT.png** draws busbw against size (log2 axis), one line per
  algorithm, one panel per collective, with matplotlib's object API (a bare
  `Figure`, no pyplot and no display), imported only when asked for.

`run` also returns the rows as dicts (algorithm, collective, world_size,
bytes, count, dtype, op, time_us, algbw_gb_per_s, busbw_gb_per_s, wrong),
for scripts and tests driving it through `Session.run`.
"""

import argparse
import importlib
import re
from dataclasses import dataclass, field

import numpy as np

from kernbench.ccl.install import load_ccl_config, resolve_algorithm_config
from kernbench.ccl.records import bus_factor
from kernbench.cli.bench_options import add_workers_argument, check_workers
from kernbench.cli.output_files import checked_output
from kernbench.errors import KernbenchError

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "all_to_all")
IN_PLACE = ("all_reduce", "broadcast", "reduce")
REDUCING = ("all_reduce", "reduce_scatter", "reduce")
ROOT = 0  # broadcast's source and reduce's destination
CALLS = {  # kind -> how rank code calls it (the tensor forms, which both rank paths take)
    "all_reduce": lambda dist, source, target: dist.all_reduce(source, op="sum"),
    "all_gather": lambda dist, source, target: dist.all_gather_into_tensor(target, source),
    "reduce_scatter": lambda dist, source, target: dist.reduce_scatter_tensor(target, source, op="sum"),
    "broadcast": lambda dist, source, target: dist.broadcast(source, src=ROOT),
    "reduce": lambda dist, source, target: dist.reduce(source, dst=ROOT, op="sum"),
    "all_to_all": lambda dist, source, target: dist.all_to_all_single(target, source),
}
DTYPES = {"f16": "float16", "bf16": "bfloat16", "f32": "float32"}  # --dtype -> torch attribute
UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}
DEFAULT_MIN_BYTES = 8
DEFAULT_MAX_BYTES = 64 * 2**20
DATA_MODE_MAX_BYTES = 8 * 2**20  # default bound when values are computed (see the module docstring)
DEFAULT_FACTOR = 4
US_PER_MS = 1000
PLOT_SUFFIXES = (".png", ".svg", ".pdf")  # formats matplotlib writes without extra software


class SweepUsageError(KernbenchError):
    """A sweep option that cannot be used: the CLI prints it as one line, with status 2."""


def run(torch, argv=()):
    options = _parse(list(argv))
    timing_only = torch.is_timing_only()
    cfg = load_ccl_config()
    algorithms = _chosen(options.algorithms, list(cfg["algorithms"]), "--algorithms", f"{cfg.source} lists")
    collectives = _chosen(options.collectives, list(COLLECTIVES), "--collectives", "the sweep runs")
    dtype = getattr(torch, DTYPES[options.dtype])
    max_bytes = options.max_bytes
    if max_bytes is None:
        max_bytes = DEFAULT_MAX_BYTES if timing_only else DATA_MODE_MAX_BYTES
        if not timing_only:
            print(f"# values are computed and checked, so sizes stop at {_size(max_bytes)}; --timing-only sweeps "
                  f"to {_size(DEFAULT_MAX_BYTES)} quickly, and --max-bytes sets the bound either way")
    sizes = _sizes(options.min_bytes, max_bytes, options.factor)
    dist = torch.distributed
    rows = []
    for algorithm in algorithms:
        dist.init_process_group(backend="ahbm", pg_options={"algorithm": algorithm})
        p = dist.get_world_size()
        native = _native(cfg, algorithm, collectives)
        for kind in collectives:
            if kind not in native:
                print(f"# {algorithm}: {kind} has no schedule of its own and runs its fallback (adr/0010)")
        pe_ranks = p > torch.ahbm.device_count()
        check_workers("ccl_sweep", options.workers, p, torch.ahbm.device_count(), SweepUsageError)
        plan = _Plan(algorithm, collectives, sizes, dtype, p, pe_ranks, timing_only, rows,
                     options.workers if pe_ranks else p)
        if not pe_ranks:
            torch.multiprocessing.spawn(_rank_worker, args=(torch, plan), nprocs=p)
        elif plan.workers == 1:
            _pe_rank_worker(torch, plan, 0)
        else:
            torch.multiprocessing.spawn(_pe_rank_worker_on_sip, args=(torch, plan), nprocs=plan.workers)
        dist.destroy_process_group()
    wrong = sum(row["wrong"] for row in rows if row["wrong"] is not None)
    if options.plot:
        _plot(rows, collectives, options.plot)
        print(f"# plot: {options.plot}")
    if wrong:
        bad = [f"{r['algorithm']} {r['collective']} {r['bytes']} B" for r in rows if r["wrong"]]
        raise AssertionError(f"{wrong} wrong elements in {len(bad)} rows: {', '.join(bad[:8])}")
    return rows


# ---- options ---------------------------------------------------------------------------------

class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise SweepUsageError(f"{self.prog}: {message} ({' '.join(self.format_usage().split())})")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The sweep's options (`kernbench run ccl_sweep --help`)."""
    parser.add_argument("--algorithms", metavar="A,B", type=_names, default=None,
                        help="algorithms of ccl.yaml to run (default: all of them)")
    parser.add_argument("--collectives", metavar="C,D", type=_names, default=None,
                        help=f"collectives to run (default: {','.join(COLLECTIVES)})")
    parser.add_argument("--min-bytes", metavar="N", type=_bytes, default=DEFAULT_MIN_BYTES,
                        help="smallest size in bytes, K/M/G suffixes allowed (default 8)")
    parser.add_argument("--max-bytes", metavar="N", type=_bytes, default=None,
                        help="largest size (default 64M with --timing-only, 8M when values are computed)")
    parser.add_argument("--factor", metavar="F", type=int, default=DEFAULT_FACTOR,
                        help="each size is the previous one times F (default 4)")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="f16", help="element type (default f16)")
    parser.add_argument("--plot", metavar="OUT.png", default=None, help="draw busbw against size into OUT.png")
    add_workers_argument(parser)


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = _Parser(prog="ccl_sweep", add_help=False,
                     description="nccl-tests-style sweep of collectives over sizes and algorithms")
    add_arguments(parser)
    options = parser.parse_args(argv)
    if options.factor < 2:
        parser.error(f"--factor {options.factor}: must be at least 2")
    if options.max_bytes is not None and options.max_bytes < options.min_bytes:
        parser.error(f"--max-bytes {options.max_bytes} is below --min-bytes {options.min_bytes}")
    if options.plot is not None:
        if not options.plot.lower().endswith(PLOT_SUFFIXES):
            parser.error(f"--plot {options.plot}: expected a name ending in {', '.join(PLOT_SUFFIXES)}")
        checked_output("--plot", options.plot)  # before the sweep, not after it
    return options


def _names(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"{text!r} names nothing; expected a comma-separated list")
    return names


def _bytes(text: str) -> int:
    match = re.fullmatch(r"\s*(\d+)\s*([KMG]?)i?B?\s*", text, re.IGNORECASE)
    if not match or int(match.group(1)) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive size such as 8, 512K, 64M or 1G")
    return int(match.group(1)) * UNITS[match.group(2).upper()]


def _chosen(asked: list[str] | None, valid: list[str], flag: str, where: str) -> list[str]:
    if asked is None:
        return valid
    unknown = [name for name in asked if name not in valid]
    if unknown:
        raise SweepUsageError(f"ccl_sweep: {flag}: unknown {', '.join(map(repr, unknown))}; {where}: "
                              f"{', '.join(valid)}")
    return list(dict.fromkeys(asked))


def _sizes(low: int, high: int, factor: int) -> list[int]:
    sizes = []
    size = low
    while size <= high:
        sizes.append(size)
        size *= factor
    if sizes and sizes[-1] != high:
        sizes.append(high)
    return sizes


def _native(cfg, algorithm: str, collectives: list[str]) -> list[str]:
    """The collectives whose function the algorithm's module defines; the others run their fallback."""
    module = importlib.import_module(resolve_algorithm_config(cfg, algorithm)["module"])
    return [kind for kind in collectives if callable(getattr(module, kind, None))]


# ---- running -------------------------------------------------------------------------------------

@dataclass
class _Plan:
    """What one algorithm's workers run, and where rank 0 puts the rows."""

    algorithm: str
    collectives: list
    sizes: list
    dtype: object
    p: int  # the world size
    pe_ranks: bool
    timing_only: bool
    rows: list
    workers: int  # how many workers drive the p ranks (p of them when ranks are SIPs)
    pending: dict = field(default_factory=dict)  # (collective, count) -> row waiting for every rank's #wrong
    # the last (collective, count) checked, and every rank's expected output
    _expected: tuple = (None, None)

    def steps(self, kind: str):
        """(bytes, count) of each size this collective runs: count divisible by p where shares must be whole."""
        itemsize = self.dtype.numpy.itemsize
        for nbytes in self.sizes:
            count = nbytes // itemsize
            if kind != "all_reduce":
                count -= count % self.p
            if count:
                yield count * itemsize, count

    def expected(self, kind: str, rank: int, count: int) -> np.ndarray:
        """What rank `rank`'s output must hold, from numpy on the same inputs (computed once per row)."""
        key, outputs = self._expected
        if key != (kind, count):
            outputs = _expected(kind, count, self.p, self.dtype)
            self._expected = ((kind, count), outputs)
        return outputs[rank]

    def report(self, kind: str, count: int, wrong: int | None, elapsed_ms: float | None, parts: int = 1) -> None:
        """Add one rank's result (`parts` of them for a worker driving PE ranks); the last one prints the row."""
        key = (kind, count)
        row = self.pending.get(key)
        if row is None:
            row = self.pending[key] = _row(self, kind, count)
            if not self.rows or (self.rows[-1]["algorithm"], self.rows[-1]["collective"]) != (self.algorithm, kind):
                print(_header(self, kind))
        if elapsed_ms is not None:
            _timed(row, kind, self.p, elapsed_ms)
        if wrong is not None:
            row["wrong"] = (row["wrong"] or 0) + wrong
        row["reported"] += parts
        if row["reported"] == self.p:
            del self.pending[key]
            del row["reported"]
            self.rows.append(row)
            print(_line(row))
            if count == list(self.steps(kind))[-1][1]:
                table = [r for r in self.rows if (r["algorithm"], r["collective"]) == (self.algorithm, kind)]
                print(f"# Avg bus bandwidth    : {_average_busbw(table):.3f} GB/s")


def _rank_worker(rank, torch, plan: _Plan) -> None:
    """One rank per SIP: tensors on ahbm:rank; rank 0 times each call."""
    torch.ahbm.set_device(rank)
    for kind in plan.collectives:
        for nbytes, count in plan.steps(kind):
            inputs, outputs = _shapes(kind, count, plan.p)
            source = torch.empty(inputs, dtype=plan.dtype) if plan.timing_only else \
                torch.tensor(_values(rank, inputs, plan.dtype), dtype=plan.dtype)
            target = source if kind in IN_PLACE else torch.empty(outputs, dtype=plan.dtype)
            elapsed = _timed_call(torch, kind, source, target, timed=rank == 0)
            wrong = None if plan.timing_only else int(np.count_nonzero(
                target.numpy() != plan.expected(kind, rank, count)))
            plan.report(kind, count, wrong, elapsed)


def _pe_rank_worker_on_sip(worker, torch, plan: _Plan) -> None:
    """A spawned worker driving the PE ranks of its own SIP (ahbm:worker)."""
    torch.ahbm.set_device(worker)
    _pe_rank_worker(torch, plan, worker)


def _pe_rank_worker(torch, plan: _Plan, worker: int) -> None:
    """Ranks are PEs: the worker's m = p / workers ranks, first = worker·m, hold one tensor per buffer spread over
    m PEs of its SIP, chunk j of it being rank first + j's; worker 0 times each call."""
    m = plan.p // plan.workers
    ranks = range(worker * m, (worker + 1) * m)
    dp = torch.distributed.pe_rank_policy()
    for kind in plan.collectives:
        for nbytes, count in plan.steps(kind):
            inputs, outputs = _shapes(kind, count, plan.p)
            if plan.timing_only:
                source = torch.empty(1, m * inputs, dtype=plan.dtype, dp=dp)
            else:
                values = np.concatenate([_values(r, inputs, plan.dtype) for r in ranks]).reshape(1, m * inputs)
                source = torch.tensor(values, dtype=plan.dtype, dp=dp)
            target = source if kind in IN_PLACE else torch.empty(1, m * outputs, dtype=plan.dtype, dp=dp)
            elapsed = _timed_call(torch, kind, source, target, timed=worker == 0)
            wrong = None
            if not plan.timing_only:
                got = target.numpy().reshape(m, outputs)
                wrong = sum(int(np.count_nonzero(got[j] != plan.expected(kind, r, count))) for j, r in enumerate(ranks))
            plan.report(kind, count, wrong, elapsed, parts=m)


def _timed_call(torch, kind: str, source, target, *, timed: bool) -> float | None:
    """Run the collective between a barrier and the end of rank 0's stream; its simulated milliseconds if `timed`."""
    dist = torch.distributed
    dist.barrier()
    if timed:
        start, end = torch.ahbm.Event(enable_timing=True), torch.ahbm.Event(enable_timing=True)
        start.record()
    CALLS[kind](dist, source, target)
    if not timed:
        return None
    end.record()
    return start.elapsed_time(end)


def _shapes(kind: str, count: int, p: int) -> tuple[int, int]:
    """(input, output) elements per rank for a row of `count` elements."""
    if kind == "all_gather":
        return count // p, count
    if kind == "reduce_scatter":
        return count, count // p
    return count, count


def _values(rank: int, n: int, dtype) -> np.ndarray:
    """Rank `rank`'s input: ((i + 3·rank) mod 7) − 3, small integers whose sums every dtype holds exactly."""
    return (((np.arange(n, dtype=np.int64) + 3 * rank) % 7) - 3).astype(np.dtype(getattr(dtype, "numpy", dtype)))


def _expected(kind: str, count: int, p: int, dtype) -> list[np.ndarray]:
    """Each rank's expected output, from numpy on the inputs `_values` gives (sums taken in float64)."""
    if kind == "all_gather":
        gathered = np.concatenate([_values(r, count // p, dtype) for r in range(p)])
        return [gathered] * p
    if kind == "broadcast":
        return [_values(ROOT, count, dtype)] * p
    if kind == "all_to_all":
        share = count // p
        return [np.concatenate([_values(s, count, dtype)[r * share:(r + 1) * share] for s in range(p)])
                for r in range(p)]
    total = sum(_values(r, count, np.float64) for r in range(p)).astype(dtype.numpy)
    if kind == "reduce_scatter":
        share = count // p
        return [total[r * share:(r + 1) * share] for r in range(p)]
    if kind == "reduce":
        return [total if r == ROOT else _values(r, count, dtype) for r in range(p)]
    return [total] * p


# ---- rows, tables and the plot -------------------------------------------------------------------

def _row(plan: _Plan, kind: str, count: int) -> dict:
    return {"algorithm": plan.algorithm, "collective": kind, "world_size": plan.p,
            "bytes": count * plan.dtype.numpy.itemsize, "count": count, "dtype": plan.dtype.name,
            "op": "sum" if kind in REDUCING else "none", "time_us": None, "algbw_gb_per_s": None,
            "busbw_gb_per_s": None, "wrong": None, "reported": 0}


def _timed(row: dict, kind: str, p: int, elapsed_ms: float) -> None:
    seconds = elapsed_ms / 1e3
    algbw = row["bytes"] / seconds / 1e9 if seconds else 0.0
    row.update(time_us=elapsed_ms * US_PER_MS, algbw_gb_per_s=algbw, busbw_gb_per_s=algbw * bus_factor(kind, p))


def _header(plan: _Plan, kind: str) -> str:
    where = "one per SIP" if not plan.pe_ranks else "PEs of SIP 0" if plan.workers == 1 else \
        f"{plan.p // plan.workers} PEs on each of SIPs 0..{plan.workers - 1}"
    ranks = f"{plan.p} ranks ({where})"
    return (f"#\n# {plan.algorithm} {kind}, {ranks}, {plan.dtype.name}\n"
            f"# {'size':>11} {'count':>13} {'type':>6} {'redop':>6} {'time':>12} {'algbw':>8} {'busbw':>8} "
            f"{'#wrong':>7}\n"
            f"# {'(B)':>11} {'(elements)':>13} {'':>6} {'':>6} {'(us)':>12} {'(GB/s)':>8} {'(GB/s)':>8} {'':>7}")


def _line(row: dict) -> str:
    wrong = "n/a" if row["wrong"] is None else str(row["wrong"])
    return (f"  {row['bytes']:>11d} {row['count']:>13d} {row['dtype']:>6} {row['op']:>6} {row['time_us']:>12.3f} "
            f"{row['algbw_gb_per_s']:>8.2f} {row['busbw_gb_per_s']:>8.2f} {wrong:>7}")


def _average_busbw(rows: list[dict]) -> float:
    return sum(row["busbw_gb_per_s"] for row in rows) / len(rows) if rows else 0.0


def _size(nbytes: int) -> str:
    for suffix in ("G", "M", "K"):
        if nbytes % UNITS[suffix] == 0:
            return f"{nbytes // UNITS[suffix]} {suffix}iB"
    return f"{nbytes} B"


def _plot(rows: list[dict], collectives: list[str], path: str) -> None:
    from matplotlib.figure import Figure  # about a second to import: only --plot pays for it
    from matplotlib.ticker import FuncFormatter

    shown = [kind for kind in collectives if any(row["collective"] == kind for row in rows)] or collectives
    algorithms = list(dict.fromkeys(row["algorithm"] for row in rows))
    figure = Figure(figsize=(5.0 * len(shown), 4.2), layout="constrained")
    axes = figure.subplots(1, len(shown), squeeze=False)[0]
    for ax, kind in zip(axes, shown):
        for index, algorithm in enumerate(algorithms):  # one colour per algorithm in every panel
            line = [row for row in rows if row["collective"] == kind and row["algorithm"] == algorithm]
            if line:
                ax.plot([row["bytes"] for row in line], [row["busbw_gb_per_s"] for row in line], marker="o",
                        markersize=3, color=f"C{index % 10}", label=algorithm)
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: _short_size(value)))
        ax.set_title(kind)
        ax.set_xlabel("size per rank (B)")
        ax.set_ylabel("busbw (GB/s)")
        ax.grid(True, which="major", alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend()
    if rows:
        figure.suptitle(f"bus bandwidth, {rows[0]['world_size']} ranks, {rows[0]['dtype']}")
    figure.savefig(path, dpi=120)


def _short_size(value: float) -> str:
    nbytes = int(round(value))
    for suffix in ("G", "M", "K"):
        if nbytes >= UNITS[suffix] and nbytes % UNITS[suffix] == 0:
            return f"{nbytes // UNITS[suffix]}{suffix}"
    return str(nbytes)
