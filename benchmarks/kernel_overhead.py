"""Overhead of the Triton bridge against Triton's own interpreter.

Runs the tutorial-03 GEMM (256x256x256 fp16, 64x64x32 blocks, fp32
accumulation, 16 programs) twice in this process:

  (a) under Triton's stock interpreter (TRITON_INTERPRET), on numpy arrays
      behind a minimal torch-like shim, and
  (b) through the kernbench bridge with a minimal numpy port (aligned
      gathers and scatters on one byte buffer, numpy matmul, a counter for
      vector-op notices),

takes the best of several repetitions of each, checks both against numpy,
and prints the wall times, the bridge's port requests and wall time per
request. The last line is `overhead_vs_interpreter: X.XX` (bridge / stock).
`--profile` adds the bridge's cProfile top functions.

Run as `python benchmarks/kernel_overhead.py` from the repository root.
"""

from __future__ import annotations

import os

os.environ["TRITON_INTERPRET"] = "1"  # the stock run needs nested jit helpers (tl.cdiv) interpreted

import argparse
import cProfile
import pstats
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "kernels"))

from kernels_under_test import matmul_kernel  # noqa: E402
from numpy_torch import NumpyTensor  # noqa: E402

from kernbench.kernels import prepare_launch  # noqa: E402
from kernbench.kernels.triton_bridge.dtypes import numpy_dtype_of  # noqa: E402
from kernbench.numerics import assert_close  # noqa: E402

M = N = K = 256
BLOCKS = dict(BLOCK_SIZE_M=64, BLOCK_SIZE_N=64, BLOCK_SIZE_K=32, GROUP_SIZE_M=8)
GRID = ((M // 64) * (N // 64),)
REPEATS = 3
BASE = 1 << 20


class Buffer:
    """Device memory for the bridge run: arrays placed in one byte buffer."""

    def __init__(self, size: int) -> None:
        self.bytes = np.zeros(size, dtype=np.uint8)
        self.next = BASE

    def place(self, values: np.ndarray, dtype_name: str) -> "Placed":
        placed = Placed(self, self.next, values.shape, dtype_name)
        start = self.next - BASE
        self.bytes[start : start + values.nbytes] = values.reshape(-1).view(np.uint8)
        self.next += (values.nbytes + 4095) // 4096 * 4096
        return placed


class Placed:
    def __init__(self, buffer: Buffer, address: int, shape: tuple, dtype_name: str) -> None:
        self.buffer, self.address, self.shape, self.dtype_name = buffer, address, shape, dtype_name

    def __kernbench_pointer__(self):
        return self.address, self.dtype_name

    def numpy(self) -> np.ndarray:
        dtype = numpy_dtype_of(self.dtype_name)
        start = self.address - BASE
        return self.buffer.bytes[start : start + int(np.prod(self.shape)) * dtype.itemsize].view(dtype).reshape(self.shape)


class MinimalPort:
    """The least a port can do: aligned element gathers/scatters, matmul, counting."""

    def __init__(self, buffer: Buffer) -> None:
        self.buffer = buffer
        self.requests: Counter = Counter()

    def _indices(self, addresses, mask, itemsize):
        indices = (addresses - BASE) // itemsize
        return indices if mask is None else np.where(mask, indices, 0)

    def load(self, addresses, mask, dtype_name):
        self.requests["load"] += 1
        dtype = numpy_dtype_of(dtype_name)
        return self.buffer.bytes.view(dtype)[self._indices(addresses, mask, dtype.itemsize)]

    def store(self, addresses, values, mask):
        self.requests["store"] += 1
        view = self.buffer.bytes.view(values.dtype)
        indices = (addresses - BASE) // values.dtype.itemsize
        if mask is None:
            view[indices] = values
        else:
            view[indices[mask]] = np.broadcast_to(values, indices.shape)[mask]

    def dot(self, a, b, acc, out_dtype_name):
        self.requests["dot"] += 1
        return np.matmul(a, b, dtype=acc.dtype) + acc

    def vector(self, op, n_elements, dtype_name):
        self.requests["vector"] += 1


def best_of(run) -> float:
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", action="store_true", help="print the bridge run's cProfile top functions")
    profile = parser.parse_args().profile

    rng = np.random.default_rng(0)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    expected = a.astype(np.float64) @ b.astype(np.float64)
    strides = (K, 1, N, 1, N, 1)

    c_stock = np.zeros((M, N), np.float16)
    stock_args = (NumpyTensor(a), NumpyTensor(b), NumpyTensor(c_stock), M, N, K, *strides)
    stock = best_of(lambda: matmul_kernel[GRID](*stock_args, **BLOCKS))
    assert_close(c_stock, expected, "f16")

    buffer = Buffer(1 << 20)
    A, B, C = buffer.place(a, "f16"), buffer.place(b, "f16"), buffer.place(np.zeros((M, N), np.float16), "f16")
    port = MinimalPort(buffer)

    def bridge_run():
        launch = prepare_launch(matmul_kernel, GRID, (A, B, C, M, N, K, *strides), BLOCKS)
        for pid in range(GRID[0]):
            launch.run_program((pid, 0, 0), port)

    bridge = best_of(bridge_run)
    assert_close(C.numpy(), expected, "f16")
    requests_per_run = {op: count // REPEATS for op, count in sorted(port.requests.items())}
    total_requests = sum(requests_per_run.values())

    print(f"gemm {M}x{N}x{K} f16, blocks 64x64x32, {GRID[0]} programs, best of {REPEATS}")
    print(f"stock interpreter      : {stock * 1e3:8.1f} ms")
    print(f"kernbench bridge       : {bridge * 1e3:8.1f} ms")
    print(f"port requests per run  : {total_requests} {requests_per_run}")
    print(f"bridge wall per request: {bridge / total_requests * 1e6:8.1f} us")
    if profile:
        profiler = cProfile.Profile()
        profiler.runcall(bridge_run)
        pstats.Stats(profiler).sort_stats("tottime").print_stats(15)
    print(f"overhead_vs_interpreter: {bridge / stock:.2f}")


if __name__ == "__main__":
    main()
