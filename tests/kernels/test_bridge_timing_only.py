"""Timing-only launches run data-independent kernels and refuse the others."""

import numpy as np
import pytest
from flat_port import FlatMemory, FlatPort, run_grid
from kernels_under_test import branch_on_load_kernel, gather_kernel, loop_bound_from_load_kernel, matmul_kernel

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
