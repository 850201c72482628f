"""Which CUDA kernels PyTorch launches for each anchor op, with their grid, block and duration: what the vendor
library runs, for kernbench's device-op model to follow (adr/0016-device-ops.md, "Matmul").

Run on a machine with a CUDA GPU and PyTorch (not on kernbench's torch):

    python benchmarks/anchors/profile_torch_kernels.py OUT.json

Every point of `measure_torch_ops.py` (the same ops on the same tensors) is
run three times to warm up, then five times under `torch.profiler` (CUDA
activity), a 256 MiB buffer zeroed before each call so the L2 is cold as in
the timed anchors. Per point the file lists each kernel the op launched:
its name, grid, block, shared memory, registers per thread, the profiler's
estimated occupancy, how many times it ran, and its median duration in µs.
These durations are the kernels' alone (no launch gap), under a short run:
the anchors' `do_bench` times, over 100 ms of repetitions, are what kernbench
is held to.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parent))

from measure_torch_ops import environment, matmul_points, runner, vector_points  # noqa: E402

CALLS = 5


def kernels_of(fn, flush: torch.Tensor) -> list[dict]:
    """The kernels `fn` launches (the flush's own excluded), each with its launch configuration and median time."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(CALLS):
            flush.zero_()
            fn()
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as folder:
        trace = Path(folder) / "trace.json"
        prof.export_chrome_trace(str(trace))
        events = json.loads(trace.read_text())["traceEvents"]
    found: dict[str, dict] = {}
    for event in events:
        if event.get("cat") != "kernel" or _is_flush(event["name"]):
            continue
        args = event.get("args", {})
        entry = found.setdefault(event["name"], {
            "kernel": event["name"], "grid": args.get("grid"), "block": args.get("block"),
            "shared_memory": args.get("shared memory"), "registers_per_thread": args.get("registers per thread"),
            "estimated_occupancy_pct": args.get("est. achieved occupancy %"), "durations": []})
        entry["durations"].append(event["dur"])
    rows = []
    for entry in found.values():
        durations = sorted(entry.pop("durations"))
        rows.append({**entry, "calls": len(durations), "median_us": durations[len(durations) // 2]})
    return rows


def _is_flush(name: str) -> bool:
    """Whether a kernel is the flush's `zero_` (a fill of the int8 buffer)."""
    return "FillFunctor" in name and "signed char" in name


def main(out: str) -> None:
    torch.manual_seed(0)
    flush = torch.empty(256 << 20, device="cuda", dtype=torch.int8)
    points = list(matmul_points(False)) + list(vector_points(False))
    for point in points:
        fn = runner(point)
        point["kernels"] = kernels_of(fn, flush)
        del fn
        torch.cuda.empty_cache()
        print(json.dumps({k: v for k, v in point.items() if k != "kernels"}),
              [(k["kernel"][:60], k["grid"], k["block"], k["median_us"]) for k in point["kernels"]], flush=True)
    with open(out, "w") as f:
        json.dump({"environment": environment(), "points": points}, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
