"""Measure NCCL collectives on the GPUs of this host, the way the anchors in this folder were taken.

Needs PyTorch with CUDA and NCCL and at least `--gpus` GPUs (not kernbench:
this runs on the real machine). One process per GPU; per collective and
size (fp16, 8 B to 512 MiB by factors of 4), 5 warm-up calls, then 20 calls
(5 above 32 MiB) issued back to back on the default stream, timed with
`time.perf_counter()` from before the first call to after
`torch.cuda.synchronize()`; that span over the number of calls, so it
includes the host's per-call cost. The loop runs `--repeats` times (default
5) and `time_us` is the median: single loops of 5 large calls were seen
33% and 230% off their neighbours. `bytes` follows nccl-tests: the
whole buffer (all_gather: the gathered output; reduce_scatter: the input).
Rank 0's times are written, with the GPU, driver-visible NCCL and PyTorch
versions, as JSON to `--out`.

Run as `python benchmarks/anchors/measure_nccl.py --out FILE.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast")
SIZES = [8 * 4**k for k in range(13)] + [512 << 20]  # 8 B ... 128 MiB by 4, then 512 MiB
BUS_FACTORS = {"all_reduce": lambda n: 2 * (n - 1) / n, "all_gather": lambda n: (n - 1) / n,
               "reduce_scatter": lambda n: (n - 1) / n, "broadcast": lambda n: 1.0}


def _call(dist, collective: str, buffers):
    """One call of `collective` on the buffers `_buffers` made."""
    source, target = buffers
    if collective == "all_reduce":
        dist.all_reduce(source)
    elif collective == "all_gather":
        dist.all_gather_into_tensor(target, source)
    elif collective == "reduce_scatter":
        dist.reduce_scatter_tensor(target, source)
    else:
        dist.broadcast(source, 0)


def _buffers(torch, collective: str, nbytes: int, world: int):
    """(source, target) of fp16 for a call of `nbytes` in nccl-tests' sense."""
    elements = max(world, nbytes // 2 // world * world)
    if collective == "all_gather":
        return torch.ones(elements // world, dtype=torch.float16, device="cuda"), \
            torch.empty(elements, dtype=torch.float16, device="cuda")
    if collective == "reduce_scatter":
        return torch.ones(elements, dtype=torch.float16, device="cuda"), \
            torch.empty(elements // world, dtype=torch.float16, device="cuda")
    return torch.ones(elements, dtype=torch.float16, device="cuda"), None


def _worker(rank: int, world: int, repeats: int, out: str) -> None:
    import torch
    import torch.distributed as dist

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29511")
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world)
    rows = []
    for collective in COLLECTIVES:
        for nbytes in SIZES:
            buffers = _buffers(torch, collective, nbytes, world)
            for _ in range(5):
                _call(dist, collective, buffers)
            torch.cuda.synchronize()
            calls = 20 if nbytes <= 32 << 20 else 5
            spans = []
            for _ in range(repeats):
                dist.barrier()
                torch.cuda.synchronize()  # every rank starts the loop with nothing in flight
                began = time.perf_counter()
                for _ in range(calls):
                    _call(dist, collective, buffers)
                torch.cuda.synchronize()
                spans.append((time.perf_counter() - began) / calls)
            seconds = statistics.median(spans)
            algbw = nbytes / seconds / 1e9
            rows.append({"collective": collective, "bytes": nbytes, "time_us": seconds * 1e6, "algbw_gbps": algbw,
                         "busbw_gbps": algbw * BUS_FACTORS[collective](world)})
            del buffers
    if rank == 0:
        machine = {"gpus": world, "gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
                   "nccl": ".".join(map(str, torch.cuda.nccl.version())), "repeats": repeats}
        with open(out, "w") as handle:
            json.dump({"machine": machine, "rows": rows}, handle, indent=1)
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="the JSON file to write")
    parser.add_argument("--gpus", type=int, default=4, help="GPUs (one process each; default 4)")
    parser.add_argument("--repeats", type=int, default=5, help="timed loops per size, the median kept (default 5)")
    args = parser.parse_args()
    import torch.multiprocessing as mp

    mp.spawn(_worker, args=(args.gpus, args.repeats, args.out), nprocs=args.gpus)


if __name__ == "__main__":
    main()
