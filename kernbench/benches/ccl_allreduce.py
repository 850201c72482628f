"""All-reduce across every rank with the algorithm ccl.yaml picks, checked, and timed like nccl-tests.

Each rank holds a (1, n_elem) f16 tensor filled with rank + 1 and sums it
with every other rank's; every element must then be p(p+1)/2. With a world
size up to the SIP count, one worker per SIP does this on its own device.
With more ranks than SIPs (ccl.yaml's `world_size`), ranks are PEs of SIP 0:
the single worker places a (1, p·n_elem) tensor over p PEs, chunk r holding
rank r's values, and the all-reduce reduces across the chunks. `--workers N`
spreads them instead: N spawned workers, worker w driving p/N of those
ranks on SIP w the same way (adr/0012), which `algorithm: hierarchical`
needs. `n_elem` is ccl.yaml's `defaults.n_elem`. Rank 0 prints
`<algorithm> (ws=<p>): <p> OK`, or the ranks whose values are wrong; the
run report gives the collective's time, algbw and busbw.
"""

import numpy as np

from kernbench.ccl.install import load_ccl_config, resolve_algorithm_config
from kernbench.cli.bench_options import BenchUsageError, add_workers_argument, check_workers, parse_bench_options


def add_arguments(parser) -> None:
    """`kernbench run ccl_allreduce --help`."""
    add_workers_argument(parser)


def run(torch, argv=()):
    workers = parse_bench_options("ccl_allreduce", add_arguments, argv).workers
    config = resolve_algorithm_config(load_ccl_config())
    dist = torch.distributed
    dist.init_process_group(backend="ahbm")
    p = dist.get_world_size()
    n_elem = config["n_elem"]
    results = {}
    check_workers("ccl_allreduce", workers, p, torch.ahbm.device_count(), BenchUsageError)
    if p <= torch.ahbm.device_count():
        torch.multiprocessing.spawn(_rank_per_sip, args=(torch, n_elem, results), nprocs=p)
    elif workers == 1:
        _pe_ranks(torch, range(p), n_elem, results)
    else:
        torch.multiprocessing.spawn(_pe_ranks_on_sip, args=(torch, p // workers, n_elem, results),
                                    nprocs=workers)
    dist.destroy_process_group()
    if torch.is_timing_only():
        print(f"  {config['algorithm']} (ws={p}): timing only, values not checked")
        return
    expected = p * (p + 1) // 2
    wrong = [rank for rank, values in sorted(results.items()) if not np.all(values == expected)]
    if wrong:
        raise AssertionError(f"  {config['algorithm']} (ws={p}): ranks {wrong} do not hold {expected} "
                             f"(rank {wrong[0]} has {np.unique(results[wrong[0]])[:8]})")
    print(f"  {config['algorithm']} (ws={p}): {p} OK")


def _rank_per_sip(rank, torch, n_elem, results):
    torch.ahbm.set_device(rank)
    x = torch.full((1, n_elem), rank + 1, dtype=torch.float16)
    torch.distributed.all_reduce(x, op="sum")
    if not torch.is_timing_only():
        results[rank] = x.numpy()


def _pe_ranks_on_sip(worker, torch, share, n_elem, results):
    """A spawned worker driving ranks worker·share … on its own SIP."""
    torch.ahbm.set_device(worker)
    _pe_ranks(torch, range(worker * share, (worker + 1) * share), n_elem, results)


def _pe_ranks(torch, ranks, n_elem, results):
    """One tensor over len(ranks) PEs of the worker's SIP; chunk j of its last dimension is ranks[j]'s buffer."""
    m = len(ranks)
    values = np.repeat(np.arange(ranks[0] + 1, ranks[-1] + 2, dtype=np.float16), n_elem).reshape(1, m * n_elem)
    x = torch.tensor(values, dtype=torch.float16, dp=torch.distributed.pe_rank_policy())
    torch.distributed.all_reduce(x, op="sum")
    if torch.is_timing_only():
        return
    out = x.numpy()
    for j, rank in enumerate(ranks):
        results[rank] = out[:, j * n_elem:(j + 1) * n_elem]
