"""Timing-only launches run data-independent kernels and refuse the others."""

import numpy as np
import pytest
from flat_port import FlatMemory, FlatPort, run_grid
from kernels_under_test import (
    branch_on_load_kernel,
    custom_reduce_kernel,
    elementwise_kernel,
    gather_kernel,
    loop_bound_from_load_kernel,
    mask_from_load_kernel,
    matmul_kernel,
    reduce_rows_kernel,
    softmax_kernel,
)

from kernbench.kernels import TimingOnlyRefusal, prepare_launch


class ZeroLoadPort(FlatPort):
    """A timing-only port: checks bounds but returns zeros instead of memory contents."""

    def load(self, addresses, mask, dtype_name):
        return np.zeros_like(super().load(addresses, mask, dtype_name))


def test_adr0007_t28_data_independent_kernel_runs_timing_only():
    memory = FlatMemory()
    a = memory.from_numpy("a", np.ones((64, 64)), "f16")
    c = memory.zeros("c", (64, 64), "f16")
    meta = dict(BLOCK_SIZE_M=32, BLOCK_SIZE_N=32, BLOCK_SIZE_K=32, GROUP_SIZE_M=2)
    launch = prepare_launch(matmul_kernel, (4,), (a, a, c, 64, 64, 64, 64, 1, 64, 1, 64, 1), meta, timing_only=True)
    port = ZeroLoadPort(memory)
    run_grid(launch, port)
    assert port.calls["dot"] == 4 * 2 and port.calls["store"] == 4


@pytest.mark.parametrize(
    "kernel, use",
    [
        (branch_on_load_kernel, "branch or loop condition"),
        (loop_bound_from_load_kernel, "loop bound"),
    ],
    ids=["if", "range"],
)
def test_adr0007_t29_control_flow_on_loaded_values_is_refused(kernel, use):
    memory = FlatMemory()
    flag = memory.from_numpy("flag", np.array([3]), "i32")
    out = memory.zeros("out", (1,), "f32")
    launch = prepare_launch(kernel, (1,), (flag, out), {}, timing_only=True)

    with pytest.raises(TimingOnlyRefusal, match=f"kernel '{kernel.fn.__name__}' program \\(0, 0, 0\\).*{use}"):
        run_grid(launch, ZeroLoadPort(memory))


def test_adr0007_t30_addresses_computed_from_loaded_values_are_refused():
    memory = FlatMemory()
    index = memory.from_numpy("index", np.arange(4), "i32")
    table = memory.from_numpy("table", np.arange(4), "f32")
    out = memory.zeros("out", (4,), "f32")
    launch = prepare_launch(gather_kernel, (1,), (index, table, out), {"BLOCK": 4}, timing_only=True)

    with pytest.raises(TimingOnlyRefusal, match="gather_kernel.*address of a load"):
        run_grid(launch, ZeroLoadPort(memory))


def test_adr0007_t31_the_same_kernels_run_with_data():
    memory = FlatMemory()
    flag = memory.from_numpy("flag", np.array([3]), "i32")
    out = memory.zeros("out", (1,), "f32")
    run_grid(prepare_launch(loop_bound_from_load_kernel, (1,), (flag, out), {}), FlatPort(memory))
    assert out.numpy().tolist() == [3.0]


@pytest.mark.parametrize("access, use", [("load", "a load"), ("store", "a store"), ("atomic", "an atomic")])
def test_adr0007_t34_masks_computed_from_loaded_values_are_refused(access, use):
    memory = FlatMemory()
    x = memory.from_numpy("x", np.array([1.0, -1.0, 2.0, -2.0]), "f32")
    out = memory.zeros("out", (4,), "f32")
    launch = prepare_launch(mask_from_load_kernel, (1,), (x, out), {"BLOCK": 4, "ACCESS": access}, timing_only=True)

    with pytest.raises(TimingOnlyRefusal, match=f"kernel 'mask_from_load_kernel' program \\(0, 0, 0\\) "
                                                f"cannot run timing-only: the mask of {use} depends on a value loaded"):
        run_grid(launch, ZeroLoadPort(memory))
    data_run = prepare_launch(mask_from_load_kernel, (1,), (x, out), {"BLOCK": 4, "ACCESS": access})
    run_grid(data_run, FlatPort(memory))


class RequestLog(FlatPort):
    """A FlatPort that also records every request's kind and size, in order."""

    def __init__(self, memory, zero_loads: bool = False) -> None:
        super().__init__(memory)
        self.zero_loads = zero_loads
        self.requests = []

    def load(self, addresses, mask, dtype_name):
        self.requests.append(("load", addresses.shape, dtype_name))
        loaded = super().load(addresses, mask, dtype_name)
        return np.zeros_like(loaded) if self.zero_loads else loaded

    def store(self, addresses, values, mask):
        self.requests.append(("store", addresses.shape, values.dtype.name))
        super().store(addresses, values, mask)

    def dot(self, a, b, acc, out_dtype_name):
        self.requests.append(("dot", a.shape, b.shape, out_dtype_name))
        return super().dot(a, b, acc, out_dtype_name)

    def vector(self, op, n_elements, dtype_name):
        self.requests.append(("vector", op, n_elements, dtype_name))
        super().vector(op, n_elements, dtype_name)


def _value_ops_kernels(memory):
    """(kernel, grid, args, meta) launches covering elementwise math, casts, reductions, a dot and masked loads."""
    rng = np.random.default_rng(7)
    x, y = (memory.from_numpy(name, rng.uniform(0.5, 2.0, 32), "f32") for name in ("x", "y"))
    rows = memory.from_numpy("rows", rng.standard_normal((4, 16)), "f32")
    a = memory.from_numpy("a", rng.standard_normal((32, 32)), "f16")
    return [
        (elementwise_kernel, (1,), (x, y, memory.zeros("e", (9 * 30,), "f32"), 30), {"BLOCK": 32}),
        (softmax_kernel, (4,), (memory.zeros("s", (4, 16), "f32"), rows, 16, 16, 12), {"BLOCK_SIZE": 16}),
        (reduce_rows_kernel, (1,), (rows, memory.zeros("rs", (4,), "f32"), memory.zeros("cm", (16,), "f32")),
         {"COLS": 16, "ROWS": 4}),
        (custom_reduce_kernel, (1,), (x, memory.zeros("p", (1,), "f32"), memory.zeros("i", (1,), "i32")), {"N": 32}),
        (matmul_kernel, (1,), (a, a, memory.zeros("c", (32, 32), "f16"), 32, 32, 32, 32, 1, 32, 1, 32, 1),
         dict(BLOCK_SIZE_M=32, BLOCK_SIZE_N=32, BLOCK_SIZE_K=16, GROUP_SIZE_M=1)),
    ]


def test_adr0007_t35_timing_only_ops_are_charged_as_with_data_but_not_computed():
    logs = {}
    for timing_only in (False, True):
        memory = FlatMemory()
        port = RequestLog(memory, zero_loads=timing_only)
        # Computing on the zeros a timing-only port returns would divide 0 by 0; nothing may compute.
        with np.errstate(all="raise" if timing_only else "warn"):
            for kernel, grid, args, meta in _value_ops_kernels(memory):
                run_grid(prepare_launch(kernel, grid, args, meta, timing_only=timing_only), port)
        logs[timing_only] = port.requests
        if timing_only:
            # exp(0) would be 1 and the cast of 0.5 would be 0.5: every stored value is a stand-in zero.
            assert all(not array.numpy().any() for array in memory.arrays if array.name not in ("x", "y", "rows", "a"))
    assert logs[True] == logs[False]
