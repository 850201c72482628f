"""Overhead of the Triton bridge against Triton's own interpreter, configured alike.

Runs the tutorial-03 GEMM (256x256x256 fp16, 64x64x32 blocks, fp32
accumulation, 16 programs) three ways in this process:

  (a) under Triton's stock interpreter (TRITON_INTERPRET), on numpy arrays
      behind a minimal torch-like shim, with integer overflow sanitizing off
      as the bridge has it (`BridgeOptions.sanitize_overflow = False` in
      kernbench/kernels/triton_bridge/builder.py; triton 3.9 reads no
      environment variable for it, TRITON_INTERPRET is only on or off, so
      the interpreter builder's options are replaced the same way);
  (b) through the kernbench bridge with a minimal numpy port (aligned
      gathers and scatters on one byte buffer, numpy matmul, a counter for
      vector-op notices): the bridge's own cost;
  (c) through the real runtime: a `kernbench.session.Session` on the
      default topology launching the same kernel on device tensors placed
      as benches/gemm.py places them (A and C split by rows over cubes and
      PEs, B copied to every cube), each program a PE program whose loads,
      stores and dots are DMAs and matrix-unit ops of the cost model, run by
      the engine. Timed from the launch to `synchronize()` returning (the
      session and the uploads are set up before).

takes the best of several repetitions of each (the three taking turns,
so load on a shared machine hits them alike), checks all three against
numpy, and prints the wall times, the port requests and the wall time per
request. The last two lines are `flat_port_overhead_vs_interpreter:
X.XX` (b / a) and `runtime_overhead_vs_interpreter: X.XX` (c / a, the
headline). `--profile` adds the runtime run's cProfile top functions.

Run as `python benchmarks/kernel_overhead.py` from the repository root.
"""

from __future__ import annotations

import os

for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_variable] = "1"  # a multithreaded BLAS fights the simulator on a small machine
os.environ["TRITON_INTERPRET"] = "1"  # the stock run needs nested jit helpers (tl.cdiv) interpreted

import argparse  # noqa: E402
import cProfile  # noqa: E402
import dataclasses  # noqa: E402
import pstats  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections import Counter  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
from triton.runtime import interpreter  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "kernels"))

from kernels_under_test import matmul_kernel  # noqa: E402
from numpy_torch import NumpyTensor  # noqa: E402

from kernbench.kernels import prepare_launch  # noqa: E402
from kernbench.kernels.triton_bridge.builder import BridgeOptions  # noqa: E402
from kernbench.kernels.triton_bridge.dtypes import numpy_dtype_of  # noqa: E402
from kernbench.numerics import assert_close  # noqa: E402
from kernbench.session import Session  # noqa: E402

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


def timed(run) -> float:
    began = time.perf_counter()
    run()
    return time.perf_counter() - began


def configure_stock_like_bridge() -> None:
    """Give Triton's interpreter the bridge's overflow-sanitizing setting (the rest already agree)."""
    options = interpreter.interpreter_builder.options
    interpreter.interpreter_builder.options = dataclasses.replace(
        options, sanitize_overflow=BridgeOptions.sanitize_overflow)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", action="store_true", help="print the runtime run's cProfile top functions")
    profile = parser.parse_args().profile
    configure_stock_like_bridge()

    rng = np.random.default_rng(0)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    expected = a.astype(np.float64) @ b.astype(np.float64)
    strides = (K, 1, N, 1, N, 1)

    c_stock = np.zeros((M, N), np.float16)
    stock_args = (NumpyTensor(a), NumpyTensor(b), NumpyTensor(c_stock), M, N, K, *strides)

    def stock_run():
        matmul_kernel[GRID](*stock_args, **BLOCKS)

    buffer = Buffer(1 << 20)
    A, B, C = buffer.place(a, "f16"), buffer.place(b, "f16"), buffer.place(np.zeros((M, N), np.float16), "f16")
    port = MinimalPort(buffer)

    def flat_port_run():
        launch = prepare_launch(matmul_kernel, GRID, (A, B, C, M, N, K, *strides), BLOCKS)
        for pid in range(GRID[0]):
            launch.run_program((pid, 0, 0), port)

    session = Session("default")
    walls = {"stock": [], "flat": [], "runtime": []}
    runtime_ops = []
    results = {}

    def bench(torch):
        """Uploads first, then each repetition times the three runs in turn (load on the machine hits all alike)."""
        props = torch.ahbm.get_device_properties()
        rows_split = torch.DPPolicy(cube="row_wise", pe="row_wise")
        per_cube_copy = torch.DPPolicy(cube="replicate", pe="row_wise", num_pes=props.multi_processor_count)
        device_a = torch.tensor(a, dtype=torch.float16, dp=rows_split, name="A")
        device_b = torch.tensor(b, dtype=torch.float16, dp=per_cube_copy, name="B")
        device_c = torch.empty(M, N, dtype=torch.float16, dp=rows_split, name="C")
        torch.ahbm.synchronize()
        oplog = session.ctx.machine.oplog

        def runtime_run():
            matmul_kernel[GRID](device_a, device_b, device_c, M, N, K, *strides, **BLOCKS)
            torch.ahbm.synchronize()

        for _ in range(REPEATS):
            walls["stock"].append(timed(stock_run))
            walls["flat"].append(timed(flat_port_run))
            before = len(oplog)
            walls["runtime"].append(timed(runtime_run))
            runtime_ops.append(len(oplog) - before)
        if profile:
            profiler = cProfile.Profile()
            profiler.runcall(runtime_run)
            pstats.Stats(profiler).sort_stats("tottime").print_stats(15)
        results["runtime"] = device_c.numpy()

    session.run(bench, session.torch)
    assert_close(c_stock, expected, "f16")
    assert_close(C.numpy(), expected, "f16")
    assert_close(results["runtime"], expected, "f16")
    stock, flat, runtime = (min(walls[key]) for key in ("stock", "flat", "runtime"))
    requests_per_run = {op: count // REPEATS for op, count in sorted(port.requests.items())}
    total_requests = sum(requests_per_run.values())

    print(f"gemm {M}x{N}x{K} f16, blocks 64x64x32, {GRID[0]} programs, best of {REPEATS}")
    print(f"stock interpreter, sanitize_overflow=False: {stock * 1e3:8.1f} ms")
    print(f"bridge, flat numpy port                   : {flat * 1e3:8.1f} ms")
    print(f"bridge, full runtime (Session, default)   : {runtime * 1e3:8.1f} ms")
    print(f"port requests per run : {total_requests} {requests_per_run}")
    print(f"runtime op-log entries per launch: {runtime_ops[-1]}")
    print(f"wall per port request : {flat / total_requests * 1e6:6.1f} us flat port, "
          f"{runtime / total_requests * 1e6:6.1f} us full runtime")
    print(f"flat_port_overhead_vs_interpreter: {flat / stock:.2f}")
    print(f"runtime_overhead_vs_interpreter: {runtime / stock:.2f}")


if __name__ == "__main__":
    main()
