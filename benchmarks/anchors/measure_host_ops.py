"""Time what the host spends issuing PyTorch ops on a real GPU: the per-op host cost behind a step that its host,
not its device, bounds.

Run on a machine with a CUDA GPU, PyTorch and Triton (not on kernbench's torch):

    python benchmarks/anchors/measure_host_ops.py OUT.json

`do_bench` (the op anchors' timer) hides the host: it flushes the L2 before
every call, and the host issues the next op while the flush runs. A training
step of small layers is the other case: the device finishes each op before
the host has issued the next, and the step takes the host's time. This
measures that time per op, as a user's eager code spends it:

- `no_grad` and `grad`: each op of `OPS`, on tiny fp16 tensors (8 x 64), called
  3000 times in a loop after 300 warm-up calls, under `torch.no_grad()` and
  with inputs that require grad (autograd records every call). Two figures per
  op, in µs per call: the loop's host time (`time.perf_counter()` before the
  first and after the last call) and the same span to after
  `torch.cuda.synchronize()`; equal figures mean the device kept up.
- `backward_chain_N`: a chain of N elementwise ops (alternately `x * c` and
  `x + c`) run forward and `backward()` 20 times after 5 warm-ups: the host
  µs per op of each, the backward's being the autograd engine's per node.
- `triton_empty`: an empty Triton kernel launched in the same loop.
- `device_back_to_back`: the device's own time per kernel when the host is
  ahead: `torch.cuda._sleep` holds the stream while the host queues 1000
  launches (an empty Triton kernel; a one-block `x + x`), and CUDA events
  around the queued launches time them on the device, in µs per kernel.

The file records the GPU, the host's CPU and the software versions.
"""

from __future__ import annotations

import json
import platform
import sys
import time

import torch
import torch.nn.functional as F
import triton

CALLS, WARMUP = 3000, 300
CHAIN_RUNS, CHAIN_WARMUP = 20, 5
ROWS, WIDTH = 8, 64


@triton.jit
def _empty(x):
    pass


def per_call_us(call) -> list[float]:
    """[host µs per call, µs per call to the device's end] over a loop of `CALLS` calls."""
    for _ in range(WARMUP):
        call()
    torch.cuda.synchronize()
    began = time.perf_counter()
    for _ in range(CALLS):
        call()
    issued = time.perf_counter()
    torch.cuda.synchronize()
    ended = time.perf_counter()
    return [round((issued - began) / CALLS * 1e6, 2), round((ended - began) / CALLS * 1e6, 2)]


def back_to_back_us(call, kernels: int = 1000) -> float:
    """Device µs per kernel of `kernels` launches queued behind a sleeping stream, timed by CUDA events."""
    call()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(100_000_000)  # ~50 ms of the stream: longer than the host takes to queue the launches
    start.record()
    for _ in range(kernels):
        call()
    end.record()
    torch.cuda.synchronize()
    return round(start.elapsed_time(end) * 1000 / kernels, 3)


def chain_us(x, n: int) -> dict:
    """Host µs per op of a chain of `n` elementwise ops, forward and backward."""
    def chain():
        y = x
        for i in range(n):
            y = y * 1.0001 if i % 2 else y + 0.5
        return y.float().sum()

    for _ in range(CHAIN_WARMUP):
        chain().backward()
    torch.cuda.synchronize()
    forward = backward = 0.0
    for _ in range(CHAIN_RUNS):
        began = time.perf_counter()
        loss = chain()
        built = time.perf_counter()
        loss.backward()
        forward, backward = forward + built - began, backward + time.perf_counter() - built
        torch.cuda.synchronize()
    return {"forward_us_per_op": round(forward / CHAIN_RUNS / n * 1e6, 2),
            "backward_us_per_op": round(backward / CHAIN_RUNS / n * 1e6, 2)}


def main(out: str) -> None:
    torch.manual_seed(0)
    half = {"device": "cuda", "dtype": torch.float16}
    x = torch.randn(ROWS, WIDTH, **half)
    weight, bias = torch.randn(WIDTH, WIDTH, **half), torch.randn(WIDTH, **half)
    norm_weight, norm_bias = torch.ones(WIDTH, **half), torch.zeros(WIDTH, **half)
    ops = {
        "add": lambda t: t + t,
        "mul_scalar": lambda t: t * 0.5,
        "linear": lambda t: F.linear(t, weight, bias),
        "matmul": lambda t: t @ weight,
        "layer_norm": lambda t: F.layer_norm(t, (WIDTH,), norm_weight, norm_bias),
        "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"),
        "softmax": lambda t: torch.softmax(t, -1),
        "masked_fill": lambda t: t.masked_fill(t > 0, 0.0),
        "transpose_contiguous": lambda t: t.t().contiguous(),
        "sum": lambda t: t.sum(),
        "view": lambda t: t.view(-1),
    }
    result = {"environment": {"gpu": torch.cuda.get_device_name(), "cpu": platform.processor() or platform.machine(),
                              "torch": torch.__version__, "cuda": torch.version.cuda, "triton": triton.__version__,
                              "python": platform.python_version(),
                              "method": "host-loop per call, see measure_host_ops.py"}}
    with torch.no_grad():
        result["no_grad"] = {name: per_call_us(lambda op=op: op(x)) for name, op in ops.items()}
    leaf = x.clone().requires_grad_(True)
    for tensor in (weight, bias, norm_weight, norm_bias):
        tensor.requires_grad_(True)
    result["grad"] = {name: per_call_us(lambda op=op: op(leaf)) for name, op in ops.items()}
    for n in (50, 200):
        result[f"backward_chain_{n}"] = chain_us(leaf, n)
    _empty[(1,)](x)
    result["triton_empty"] = per_call_us(lambda: _empty[(1,)](x))
    with torch.no_grad():
        result["device_back_to_back"] = {"triton_empty": back_to_back_us(lambda: _empty[(1,)](x)),
                                         "add": back_to_back_us(lambda: x + x)}
    with open(out, "w") as file:
        json.dump(result, file, indent=1)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: python benchmarks/anchors/measure_host_ops.py OUT.json")
    main(sys.argv[1])
