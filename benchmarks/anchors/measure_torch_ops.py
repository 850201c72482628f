"""Time ordinary PyTorch ops on a real GPU: the anchors `benchmarks/fidelity_ops.py` holds kernbench's device ops to.

Run on a machine with a CUDA GPU, PyTorch and Triton (not on kernbench's torch):

    python benchmarks/anchors/measure_torch_ops.py OUT.json [--quick]

Each point is one op written as a user writes it — `a @ b`, `x.sum()`,
`F.layer_norm(x, (n,))`, `torch.softmax(x, -1)`, `x + y`, `F.gelu(x)` — on
tensors made with `device="cuda"` (no placement of any kind), timed by
`triton.testing.do_bench` (L2 flushed before each call, median of the
repetitions, in ms) and written as microseconds. The op set is `POINTS`
below: matmul in fp16, bf16 and fp32 (TF32 off, PyTorch's default), square
512…8192 and the shapes transformer layers use (tall-skinny, K-heavy,
projection and MLP shapes), elementwise ops, reductions, softmax and
layer_norm at 2^20…2^28 elements and transformer row widths. The file
records the GPU, its memory and L2, the software versions, and the floor a
launch alone costs in this timing (an empty Triton kernel, a one-element
add).
"""

from __future__ import annotations

import json
import platform
import sys

import torch
import torch.nn.functional as F
import triton
from triton.testing import do_bench

DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}


def matmul_points(quick: bool):
    squares = (512, 1024, 2048, 4096) if quick else (512, 1024, 2048, 4096, 8192)
    for dtype in ("f16", "bf16", "f32"):
        for n in squares:
            yield {"family": "matmul", "dtype": dtype, "m": n, "n": n, "k": n}
    transformer = [(8192, 4096, 4096), (8192, 12288, 4096), (8192, 16384, 4096), (8192, 4096, 16384),
                   (2048, 2048, 2048 * 4), (16, 4096, 4096), (128, 12288, 12288), (1024, 1024, 65536),
                   (4096, 50304, 768), (65536, 1024, 256)]
    for dtype in ("f16", "bf16"):
        for m, n, k in transformer[:4] if quick else transformer:
            yield {"family": "matmul", "dtype": dtype, "m": m, "n": n, "k": k}


def vector_points(quick: bool):
    exponents = (20, 24) if quick else (20, 22, 24, 26, 28)
    for op in ("add", "mul", "gelu", "relu", "exp"):
        for dtype in ("f32", "bf16"):
            for e in exponents:
                yield {"family": "elementwise", "op": op, "dtype": dtype, "numel": 1 << e}
    for op in ("sum", "mean", "amax", "argmax", "var", "norm"):
        for e in exponents:
            yield {"family": "reduction", "op": op, "dtype": "f32", "numel": 1 << e, "dim": None}
    rows = [(4096, 1024), (4096, 4096), (16384, 4096), (8192, 12288), (16384, 1024)]
    for op in ("sum", "amax"):
        for r, c in rows[:2] if quick else rows:
            yield {"family": "reduction", "op": op, "dtype": "f32", "shape": [r, c], "dim": -1}
    for op in ("softmax", "layer_norm", "log_softmax"):
        for dtype in ("f32", "bf16"):
            for r, c in rows[:2] if quick else rows:
                yield {"family": op, "op": op, "dtype": dtype, "shape": [r, c]}


def runner(point):
    """The op of `point` as a zero-argument callable over tensors made now."""
    dtype = DTYPES[point["dtype"]]
    if point["family"] == "matmul":
        a = torch.randn(point["m"], point["k"], device="cuda", dtype=dtype)
        b = torch.randn(point["k"], point["n"], device="cuda", dtype=dtype)
        return lambda: a @ b
    shape = point.get("shape") or [point["numel"]]
    x = torch.randn(*shape, device="cuda", dtype=dtype)
    op = point["op"]
    if op in ("add", "mul"):
        y = torch.randn(*shape, device="cuda", dtype=dtype)
        return (lambda: x + y) if op == "add" else (lambda: x * y)
    if op == "gelu":
        return lambda: F.gelu(x)
    if op == "relu":
        return lambda: torch.relu(x)
    if op == "exp":
        return lambda: x.exp()
    if op == "softmax":
        return lambda: torch.softmax(x, -1)
    if op == "log_softmax":
        return lambda: torch.log_softmax(x, -1)
    if op == "layer_norm":
        return lambda: F.layer_norm(x, (shape[-1],))
    dim = point.get("dim")
    if op == "norm":
        return lambda: torch.linalg.vector_norm(x) if dim is None else torch.linalg.vector_norm(x, dim=dim)
    fn = getattr(torch, op)
    return (lambda: fn(x)) if dim is None else (lambda: fn(x, dim))


@triton.jit
def _empty(pointer):
    pass


def launch_floor() -> dict:
    """What a launch alone costs in this timing: an empty Triton kernel, and `x + y` of one element."""
    x, y = torch.randn(1, device="cuda"), torch.randn(1, device="cuda")
    return {"empty_triton_kernel_us": do_bench(lambda: _empty[(1,)](x), warmup=25, rep=100, return_mode="median")
            * 1000.0,
            "one_element_add_us": do_bench(lambda: x + y, warmup=25, rep=100, return_mode="median") * 1000.0}


def environment() -> dict:
    props = torch.cuda.get_device_properties(0)
    return {"gpu": props.name, "sms": props.multi_processor_count, "memory_gib": props.total_memory / 2**30,
            "l2_mib": getattr(props, "L2_cache_size", 0) / 2**20, "torch": torch.__version__,
            "cuda": torch.version.cuda, "triton": triton.__version__, "python": platform.python_version(),
            "allow_tf32": torch.backends.cuda.matmul.allow_tf32,
            "timer": "triton.testing.do_bench (L2 flushed per call, median, warmup 25 ms, rep 100 ms)"}


def main(out: str, quick: bool) -> None:
    torch.manual_seed(0)
    points = list(matmul_points(quick)) + list(vector_points(quick))
    for point in points:
        fn = runner(point)
        point["time_us"] = do_bench(fn, warmup=25, rep=100, return_mode="median") * 1000.0
        del fn
        torch.cuda.empty_cache()
        print(json.dumps(point), flush=True)
    with open(out, "w") as f:
        json.dump({"environment": {**environment(), **launch_floor()}, "points": points}, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1], "--quick" in sys.argv[2:])
