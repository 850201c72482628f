"""Time `torch.nn.functional.scaled_dot_product_attention` on a real GPU, forward and forward + backward: the
anchor `benchmarks/fidelity_ops.py`'s attention family holds kernbench's fused attention to.

Run on a machine with a CUDA GPU, PyTorch and Triton (not on kernbench's torch):

    python benchmarks/anchors/measure_sdpa.py OUT.json [--quick]

Each point is one call written as model code writes it:
`F.scaled_dot_product_attention(q, k, v, is_causal=...)` on (B, H, S, D)
tensors made with `device="cuda"` — B·H of 16 (2 × 8) and 64 (4 × 16), S of
512 … 4096, D of 64 and 128, bf16 and fp16, causal and not — plus a few
points off that grid (a float `attn_mask`, fp32, grouped-query heads with
`enable_gqa`, dropout). `forward` times the call on tensors that do not
require grad; `forward_backward` the call on tensors that do, then
`out.backward(grad)` (their `.grad` set to None before each call, as
`do_bench(grad_to_none=...)` does). Both are timed by `triton.testing.do_bench`
(L2 flushed before each call, warm-up 25 ms, repetitions for 100 ms, the
median), written as microseconds.

Each call is then profiled as `profile_torch_kernels.py` profiles the ops
of `measure_torch_ops.py` (three warm-up calls, five under `torch.profiler`,
the L2 flushed before each): `forward_kernels` and
`forward_backward_kernels` list the CUDA kernels with their launch shapes
and median durations, and `forward_device_us` / `forward_backward_device_us`
is the device's own time in one call (the kernels' medians summed), which
tells a point bound by the GPU from one bound by its host (where `do_bench`'s
time is mostly the host's launches). `backend` (`backward_backend`) is which
of PyTorch's attention kernels ran, read from those kernels' names: `cudnn`
(cuDNN's fused attention), `flash` (FlashAttention-2's), `efficient` (the
memory-efficient, cutlass kernels) or `math` (the unfused composite). The file records
the GPU, its memory and L2, the software versions, and the floor a launch
alone costs in this timing (an empty Triton kernel), as `measure_torch_ops.py`
does.
"""

from __future__ import annotations

import json
import platform
import sys

from pathlib import Path

import torch
import torch.nn.functional as F
import triton
from triton.testing import do_bench

sys.path.insert(0, str(Path(__file__).resolve().parent))

from profile_torch_kernels import CALLS, kernels_of  # noqa: E402

DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}
HEADS = ((2, 8), (4, 16))  # (B, H): B·H of 16 and 64


def points(quick: bool):
    """The grid, then the points off it."""
    lengths = (512, 2048) if quick else (512, 1024, 2048, 4096)
    for dtype in ("bf16", "f16"):
        for batch, heads in HEADS:
            for seq in lengths:
                for dim in (64, 128):
                    for causal in (False, True):
                        yield {"family": "attention", "dtype": dtype, "batch": batch, "heads": heads, "seq": seq,
                               "head_dim": dim, "causal": causal}
    if quick:
        return
    for seq in (1024, 4096):
        yield {"family": "attention", "dtype": "bf16", "batch": 2, "heads": 8, "seq": seq, "head_dim": 64,
               "causal": False, "mask": "float"}
        yield {"family": "attention", "dtype": "f32", "batch": 2, "heads": 8, "seq": seq, "head_dim": 64,
               "causal": False}
        yield {"family": "attention", "dtype": "bf16", "batch": 2, "heads": 32, "kv_heads": 8, "seq": seq,
               "head_dim": 128, "causal": True}
        yield {"family": "attention", "dtype": "bf16", "batch": 2, "heads": 8, "seq": seq, "head_dim": 128,
               "causal": True, "dropout": 0.1}


def tensors(point, grad: bool):
    """q, k, v (and the float mask, or None) of `point`."""
    dtype = DTYPES[point["dtype"]]
    b, h, s, d = point["batch"], point["heads"], point["seq"], point["head_dim"]
    kv = point.get("kv_heads", h)
    q = torch.randn(b, h, s, d, device="cuda", dtype=dtype, requires_grad=grad)
    k = torch.randn(b, kv, s, d, device="cuda", dtype=dtype, requires_grad=grad)
    v = torch.randn(b, kv, s, d, device="cuda", dtype=dtype, requires_grad=grad)
    mask = torch.randn(s, s, device="cuda", dtype=dtype) if point.get("mask") == "float" else None
    return q, k, v, mask


def attention(point, q, k, v, mask):
    """The point's call as a zero-argument callable."""
    extra = {"enable_gqa": True} if "kv_heads" in point else {}
    return lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=point.get("dropout", 0.0),
                                                  is_causal=point["causal"], **extra)


def backend(kernels: list[str]) -> str:
    """Which attention implementation ran, from its CUDA kernels' names."""
    text = " ".join(kernels).lower()
    if "cudnn" in text:  # before flash: cuDNN's attention kernels carry "flash" in their names too
        return "cudnn"
    if "flash" in text:
        return "flash"
    if "fmha" in text or "efficient" in text:
        return "efficient"
    return "math"


def device_us(kernels: list[dict]) -> float:
    """The device's time in one call: each kernel's median duration times the calls of it in one call."""
    return sum(kernel["median_us"] * kernel["calls"] / CALLS for kernel in kernels)


def measure(point, flush) -> None:
    q, k, v, mask = tensors(point, grad=False)
    forward = attention(point, q, k, v, mask)
    point["forward_us"] = do_bench(forward, warmup=25, rep=100, return_mode="median") * 1000.0
    kernels = kernels_of(forward, flush)
    point["backend"] = backend([kernel["kernel"] for kernel in kernels])
    point["forward_device_us"], point["forward_kernels"] = device_us(kernels), kernels
    q, k, v, mask = tensors(point, grad=True)
    call = attention(point, q, k, v, mask)
    grad = torch.randn_like(q)

    def step():
        call().backward(grad)

    point["forward_backward_us"] = do_bench(step, warmup=25, rep=100, grad_to_none=[q, k, v],
                                            return_mode="median") * 1000.0

    def fresh_step():
        q.grad = k.grad = v.grad = None
        step()

    kernels = kernels_of(fresh_step, flush)
    point["backward_backend"] = backend([kernel["kernel"] for kernel in kernels])
    point["forward_backward_device_us"], point["forward_backward_kernels"] = device_us(kernels), kernels


@triton.jit
def _empty(pointer):
    pass


def environment() -> dict:
    props = torch.cuda.get_device_properties(0)
    x = torch.randn(1, device="cuda")
    return {"gpu": props.name, "sms": props.multi_processor_count, "memory_gib": props.total_memory / 2**30,
            "l2_mib": getattr(props, "L2_cache_size", 0) / 2**20, "torch": torch.__version__,
            "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(), "triton": triton.__version__,
            "python": platform.python_version(),
            "timer": "triton.testing.do_bench (L2 flushed per call, median, warmup 25 ms, rep 100 ms)",
            "empty_triton_kernel_us": do_bench(lambda: _empty[(1,)](x), warmup=25, rep=100,
                                               return_mode="median") * 1000.0}


def main(out: str, quick: bool) -> None:
    torch.manual_seed(0)
    flush = torch.empty(256 << 20, device="cuda", dtype=torch.int8)
    measured = []
    for point in points(quick):
        measure(point, flush)
        measured.append(point)
        torch.cuda.empty_cache()
        print(json.dumps({key: value for key, value in point.items() if "kernels" not in key}), flush=True)
    with open(out, "w") as f:
        json.dump({"environment": environment(), "points": measured}, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1], "--quick" in sys.argv[2:])
