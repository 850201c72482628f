"""Time torch's row kernels on a real GPU at row widths beyond `measure_torch_ops.py`'s: the softmaxes over attention
scores (rows of 128 to 8192) and vocabularies (32000, 50257), layer norms of transformer widths.

Run on a machine with a CUDA GPU, PyTorch and Triton (not on kernbench's torch):

    python benchmarks/anchors/measure_row_kernels.py OUT.json

Each point is `torch.softmax(x, -1)`, `torch.log_softmax(x, -1)` or
`F.layer_norm(x, (n,))` on an fp32 or bf16 tensor made with `device="cuda"`,
timed as `measure_torch_ops.py` times its ops: `triton.testing.do_bench` (L2
flushed before each call, warm-up 25 ms, repetitions for 100 ms, the median),
written as microseconds. The file records the GPU, its memory and L2, the
software versions and an empty Triton kernel timed the same way.
"""

from __future__ import annotations

import json
import platform
import sys

import torch
import torch.nn.functional as F
import triton
from triton.testing import do_bench

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}
SHAPES = {
    "softmax": [(65536, 128), (32768, 256), (16384, 512), (8192, 2048), (4096, 8192), (2048, 32000), (1024, 50257)],
    "log_softmax": [(16384, 512), (8192, 2048), (2048, 32000), (1024, 50257)],
    "layer_norm": [(16384, 768), (8192, 2048), (4096, 5120), (2048, 8192)],
}


@triton.jit
def _empty(pointer):
    pass


def main(out: str) -> None:
    torch.manual_seed(0)
    points = []
    for op, shapes in SHAPES.items():
        for dtype in DTYPES:
            for rows, row in shapes:
                x = torch.randn(rows, row, device="cuda", dtype=DTYPES[dtype])
                call = {"softmax": lambda: torch.softmax(x, -1), "log_softmax": lambda: torch.log_softmax(x, -1),
                        "layer_norm": lambda: F.layer_norm(x, (row,))}[op]
                point = {"family": op, "op": op, "dtype": dtype, "shape": [rows, row],
                         "time_us": do_bench(call, warmup=25, rep=100, return_mode="median") * 1e3}
                print(json.dumps(point), flush=True)
                points.append(point)
                del x
    props, one = torch.cuda.get_device_properties(0), torch.randn(1, device="cuda")
    environment = {
        "gpu": props.name, "sms": props.multi_processor_count, "memory_gib": props.total_memory / 2**30,
        "l2_mib": getattr(props, "L2_cache_size", 0) / 2**20, "torch": torch.__version__, "cuda": torch.version.cuda,
        "triton": triton.__version__, "python": platform.python_version(),
        "timer": "triton.testing.do_bench (L2 flushed per call, median, warmup 25 ms, rep 100 ms)",
        "empty_triton_kernel_us": do_bench(lambda: _empty[(1,)](one), warmup=25, rep=100,
                                           return_mode="median") * 1e3}
    with open(out, "w") as f:
        json.dump({"environment": environment, "points": points}, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
