"""Time read-only and read-write torch ops on a real GPU behind an L2 flush that leaves the L2 dirty and one that
leaves it clean: what the dirty lines of do_bench's flush cost the op after it.

Run on a machine with a CUDA GPU and PyTorch (not on kernbench's torch):

    python benchmarks/anchors/measure_l2_writeback.py OUT.json

Each point is `x.sum()`, `torch.relu(x)` or `x.view(-1, 4096).amax(-1)` on an fp32 tensor of 2^20 to 2^28
elements made with `device="cuda"`. Per flush, 45 calls each enqueued right after a flush of a 256 MiB buffer:
`zero` (`cache.zero_()`, `triton.testing.do_bench`'s flush, whose last writes the L2 still holds, dirty, when the
op starts), `read` (`cache.sum()`, which leaves the L2 holding clean lines) and `none`; CUDA events around the op
alone, the first 5 dropped, the median of the rest in microseconds. `none` times the op right behind the host's
enqueue of the previous one and is not a device time for the small sizes.
"""

from __future__ import annotations

import json
import statistics
import sys

import torch

FLUSH_BYTES = 256 * 2**20


def timed(op, flush, reps: int = 40, warmup: int = 5) -> float:
    """The median device time in microseconds of `op` enqueued right after `flush`."""
    pairs = []
    for i in range(reps + warmup):
        flush()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        op()
        end.record()
        if i >= warmup:
            pairs.append((start, end))
    torch.cuda.synchronize()
    return statistics.median(start.elapsed_time(end) * 1000 for start, end in pairs)


def main(out: str) -> None:
    cache = torch.empty(FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
    flushes = {"zero": cache.zero_, "read": cache.sum, "none": lambda: None}
    points = []
    for power in (20, 22, 24, 25, 26, 28):
        x = torch.randn(2**power, device="cuda")
        ops = {"sum": x.sum, "relu": lambda: torch.relu(x), "amax_rows": lambda: x.view(-1, 4096).amax(-1)}
        for name, op in ops.items():
            point = {"op": name, "numel": 2**power, "dtype": "f32"}
            for flush_name, flush in flushes.items():
                point[f"flush_{flush_name}_us"] = round(timed(op, flush), 3)
            points.append(point)
            print(point, flush=True)
        del x
    environment = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                   "l2_mib": torch.cuda.get_device_properties(0).L2_cache_size / 2**20,
                   "method": "CUDA events around the op alone, after a flush of 256 MiB enqueued before it: zero "
                             "(cache.zero_(), do_bench's flush: L2 left dirty), read (cache.sum(): L2 left clean), "
                             "none; 5 warm-up then median of 40"}
    with open(out, "w") as handle:
        json.dump({"environment": environment, "points": points}, handle, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
