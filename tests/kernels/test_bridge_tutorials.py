"""Triton tutorials 01-03 run unchanged on the bridge and match numpy."""

import numpy as np
import pytest
import triton
from flat_port import FlatMemory, FlatPort, run_grid
from kernels_under_test import add_kernel, matmul_grid, matmul_kernel, softmax_kernel

from kernbench.kernels import prepare_launch
from kernbench.kernels.triton_bridge.dtypes import numpy_dtype_of
from kernbench.numerics import assert_close


@pytest.mark.parametrize("dtype_name", ["f32", "f16", "bf16"])
@pytest.mark.quick
def test_adr0007_t1_vector_add_matches_numpy(dtype_name):
    rng = np.random.default_rng(1)
    n = 1000
    x = rng.standard_normal(n).astype(numpy_dtype_of(dtype_name))
    y = rng.standard_normal(n).astype(numpy_dtype_of(dtype_name))
    memory = FlatMemory()
    X, Y = memory.from_numpy("x", x, dtype_name), memory.from_numpy("y", y, dtype_name)
    out = memory.zeros("out", (n,), dtype_name)

    grid = lambda meta: (triton.cdiv(meta["n_elements"], meta["BLOCK_SIZE"]),)
    launch = prepare_launch(add_kernel, grid, (X, Y, out, n), {"BLOCK_SIZE": 256})
    run_grid(launch, FlatPort(memory))

    assert launch.grid == (4, 1, 1)
    assert_close(out.numpy(), x.astype(np.float64) + y.astype(np.float64), dtype_name)


@pytest.mark.parametrize("dtype_name", ["f32", "f16"])
@pytest.mark.quick
def test_adr0007_t2_fused_softmax_matches_numpy(dtype_name):
    rng = np.random.default_rng(2)
    rows, cols = 37, 100
    x = rng.standard_normal((rows, cols)).astype(numpy_dtype_of(dtype_name))
    memory = FlatMemory()
    X, Y = memory.from_numpy("x", x, dtype_name), memory.zeros("y", (rows, cols), dtype_name)

    launch = prepare_launch(
        softmax_kernel, (rows,), (Y, X, cols, cols, cols), {"BLOCK_SIZE": triton.next_power_of_2(cols), "num_warps": 4}
    )
    run_grid(launch, FlatPort(memory))

    wide = x.astype(np.float64)
    expected = np.exp(wide - wide.max(axis=1, keepdims=True))
    assert_close(Y.numpy(), expected / expected.sum(axis=1, keepdims=True), dtype_name)


@pytest.mark.parametrize("shape", [(128, 128, 128), (96, 80, 72)], ids=["even", "k-tail"])
@pytest.mark.quick
def test_adr0007_t3_grouped_matmul_accumulates_in_fp32(shape):
    m, n, k = shape
    rng = np.random.default_rng(3)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    memory = FlatMemory()
    A, B = memory.from_numpy("a", a, "f16"), memory.from_numpy("b", b, "f16")
    C = memory.zeros("c", (m, n), "f16")

    meta = dict(BLOCK_SIZE_M=32, BLOCK_SIZE_N=32, BLOCK_SIZE_K=32, GROUP_SIZE_M=2, num_stages=3, num_warps=4)
    launch = prepare_launch(matmul_kernel, matmul_grid, (A, B, C, m, n, k, k, 1, n, 1, n, 1), meta)
    port = FlatPort(memory)
    run_grid(launch, port)

    programs = triton.cdiv(m, 32) * triton.cdiv(n, 32)
    assert launch.grid == (programs, 1, 1)
    assert port.calls["dot"] == programs * triton.cdiv(k, 32)
    assert_close(C.numpy(), a.astype(np.float64) @ b.astype(np.float64), "f16")
