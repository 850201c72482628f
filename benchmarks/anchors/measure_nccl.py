"""Measure NCCL collectives on the GPUs of this host, the way the anchors in this folder were taken.

Needs PyTorch with CUDA and NCCL and at least `--gpus` GPUs (not kernbench:
this runs on the real machine). One process per GPU; per collective and
size (fp16; `--sizes` picks the ladder), 5 warm-up calls, then three timings
of the same calls:

- `time_us` (host loop): 20 calls (5 above 32 MiB) issued back to back on
  the default stream, timed with `time.perf_counter()` from before the
  first call to after `torch.cuda.synchronize()`; that span over the number
  of calls, so it includes the host's per-call cost. The loop runs
  `--repeats` times (default 5) and the median is kept: single loops of 5
  large calls were seen 33% and 230% off their neighbours.
- `event_us`: the same loops timed by CUDA events recorded on the default
  stream around them (the device's view of the host loop), median.
- `graph_us`: the same number of calls captured once into a CUDA graph,
  the graph replayed `--repeats` times, each replay timed by CUDA events;
  the median over the calls. No host work between calls: what the device
  spends per call, launch gaps inside a graph included. Where capture fails
  the row says why (`graph_error`) and has no `graph_us`.

Collectives: all_reduce (sum), all_gather_into_tensor, reduce_scatter_tensor,
broadcast from rank 0, and send_recv (rank 0 sends to rank 1, which
receives; the other ranks wait at the barrier). `bytes` follows nccl-tests:
the whole buffer (all_gather: the gathered output; reduce_scatter: the
input; send_recv: the message); busbw factors 2(n-1)/n, (n-1)/n, (n-1)/n, 1
and 1.

NCCL's own environment decides algorithm and protocol; `NCCL_ALGO` and
`NCCL_PROTO` set before the run force them (NCCL reads them once per
process), and the file records every `NCCL_*` variable set. NVLink
multicast (NVLS) stays off, as the machines it was run on require.

With `NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING` NCCL logs its choice of each
collective call (`AllReduce: N Bytes -> Algo RING proto LL channel{Lo..Hi}={0..23}`,
N per rank for all-gather and reduce-scatter) and its tuning table at init;
the anchors record rank 0's as `nccl_chose` and `nccl_tuning_table`.

Rank 0's rows are written, with the GPU, NCCL and PyTorch versions, as JSON
to `--out` after every collective, so a run cut short keeps what it took.

Run as `python benchmarks/anchors/measure_nccl.py --gpus 4 --out FILE.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "send_recv")
SIZE_LADDERS = {
    "pow4": [8 * 4**k for k in range(13)] + [512 << 20],  # the first anchors' sizes: 8 B ... 128 MiB, 512 MiB
    "pow2": [8 << k for k in range(28)],  # 8 B ... 1 GiB
    # 1 to 16 MiB by about sqrt(2), where NCCL switches protocols and fixed costs still count, then 64 MiB to 1 GiB
    "fine": [int(mib * (1 << 20)) for mib in (1, 1.5, 2, 3, 4, 6, 8, 12, 16, 64, 256, 1024)],
}
BUS_FACTORS = {"all_reduce": lambda n: 2 * (n - 1) / n, "all_gather": lambda n: (n - 1) / n,
               "reduce_scatter": lambda n: (n - 1) / n, "broadcast": lambda n: 1.0, "send_recv": lambda n: 1.0}


def _call(dist, collective: str, buffers, rank: int):
    """One call of `collective` on the buffers `_buffers` made."""
    source, target = buffers
    if collective == "all_reduce":
        dist.all_reduce(source)
    elif collective == "all_gather":
        dist.all_gather_into_tensor(target, source)
    elif collective == "reduce_scatter":
        dist.reduce_scatter_tensor(target, source)
    elif collective == "broadcast":
        dist.broadcast(source, 0)
    elif rank == 0:
        dist.send(source, 1)
    elif rank == 1:
        dist.recv(source, 0)


def _buffers(torch, collective: str, nbytes: int, world: int):
    """(source, target) of fp16 for a call of `nbytes` in nccl-tests' sense, filled with ones (not zeros)."""
    elements = max(world, nbytes // 2 // world * world)
    if collective == "send_recv":
        return torch.ones(max(1, nbytes // 2), dtype=torch.float16, device="cuda"), None
    if collective == "all_gather":
        return torch.ones(elements // world, dtype=torch.float16, device="cuda"), \
            torch.empty(elements, dtype=torch.float16, device="cuda")
    if collective == "reduce_scatter":
        return torch.ones(elements, dtype=torch.float16, device="cuda"), \
            torch.empty(elements // world, dtype=torch.float16, device="cuda")
    return torch.ones(elements, dtype=torch.float16, device="cuda"), None


def _loops(torch, dist, run, calls: int, repeats: int) -> tuple[float, float]:
    """(host-loop seconds per call, event seconds per call), each the median over `repeats` loops."""
    spans, events = [], []
    for _ in range(repeats):
        dist.barrier()
        torch.cuda.synchronize()  # every rank starts the loop with nothing in flight
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        began = time.perf_counter()
        start.record()
        for _ in range(calls):
            run()
        end.record()
        torch.cuda.synchronize()
        spans.append((time.perf_counter() - began) / calls)
        events.append(start.elapsed_time(end) / 1e3 / calls)
    return statistics.median(spans), statistics.median(events)


def _graph(torch, dist, run, calls: int, repeats: int, active: bool) -> float:
    """Seconds per call of `calls` calls captured in one CUDA graph, the median over `repeats` replays. A rank
    with nothing to do (`active` false: send_recv's bystanders) captures nothing but meets every barrier."""
    if not active:
        for _ in range(1 + repeats):
            dist.barrier()
        return float("nan")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        run()  # NCCL and the allocator see the capture stream once before capturing
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    dist.barrier()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            run()
    torch.cuda.synchronize()
    graph.replay()  # warm
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        dist.barrier()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1e3 / calls)
    del graph
    return statistics.median(times)


def _worker(rank: int, world: int, args) -> None:
    import torch
    import torch.distributed as dist

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(args.port))
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=torch.device("cuda", rank))
    machine = {"gpus": world, "gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
               "nccl": ".".join(map(str, torch.cuda.nccl.version())), "repeats": args.repeats,
               "env": {k: v for k, v in sorted(os.environ.items()) if k.startswith("NCCL_")}}
    rows = []
    for collective in args.collectives.split(","):
        for nbytes in SIZE_LADDERS[args.sizes]:
            nbytes = -(-nbytes // args.round_to) * args.round_to
            if nbytes > args.max_bytes:
                continue
            buffers = _buffers(torch, collective, nbytes, world)

            def run(collective=collective, buffers=buffers):
                _call(dist, collective, buffers, rank)

            for _ in range(5):
                run()
            torch.cuda.synchronize()
            calls = 20 if nbytes <= 32 << 20 else 5
            row = {"collective": collective, "bytes": nbytes}
            if "host" in args.timings:
                seconds, event = _loops(torch, dist, run, calls, args.repeats)
                algbw = nbytes / seconds / 1e9
                row.update(time_us=seconds * 1e6, event_us=event * 1e6, algbw_gbps=algbw,
                           busbw_gbps=algbw * BUS_FACTORS[collective](world))
            if "graph" in args.timings:
                try:
                    active = collective != "send_recv" or rank < 2
                    row["graph_us"] = _graph(torch, dist, run, calls, args.repeats, active) * 1e6
                except Exception as error:  # noqa: BLE001 - the row records why capture failed
                    row["graph_error"] = f"{type(error).__name__}: {error}"[:200]
                    torch.cuda.synchronize()
            rows.append(row)
            del buffers
        if rank == 0:
            with open(args.out, "w") as handle:
                json.dump({"machine": machine, "rows": rows}, handle, indent=1)
            print(f"measure_nccl: {collective} done ({len(rows)} rows)", flush=True)
    dist.barrier()
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="the JSON file to write")
    parser.add_argument("--gpus", type=int, default=4, help="GPUs (one process each; default 4)")
    parser.add_argument("--repeats", type=int, default=5, help="timed loops per size, the median kept (default 5)")
    parser.add_argument("--collectives", default=",".join(COLLECTIVES), help="comma-separated, of " +
                        ", ".join(COLLECTIVES))
    parser.add_argument("--sizes", choices=sorted(SIZE_LADDERS), default="pow2",
                        help="pow2: 8 B to 1 GiB by 2 (default); pow4: the first anchors' ladder; fine: 1 to 16 MiB "
                        "by about sqrt(2), then 64 MiB, 256 MiB, 1 GiB")
    parser.add_argument("--max-bytes", type=int, default=1 << 30, help="skip sizes above this")
    parser.add_argument("--round-to", type=int, default=1,
                        help="round each size up to a multiple of this many bytes: 3 x 64 KiB gives 3 GPUs pieces "
                        "NCCL copies at full rate (a rank's piece of 1 MiB / 3 is not 16-byte aligned; default 1)")
    parser.add_argument("--timings", default="host,graph", help="host, graph or both (default)")
    parser.add_argument("--port", type=int, default=29511, help="the rendezvous port")
    args = parser.parse_args()
    os.environ["NCCL_NVLS_ENABLE"] = "0"  # NVLink multicast stays off (the lending machines require it)
    import torch.multiprocessing as mp

    mp.spawn(_worker, args=(args.gpus, args), nprocs=args.gpus)


if __name__ == "__main__":
    main()
