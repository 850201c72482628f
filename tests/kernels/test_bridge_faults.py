"""Out-of-bounds accesses reach the launcher as KernelFaults naming everything."""

import numpy as np
import pytest
from flat_port import FlatMemory, FlatPort, run_grid
from kernels_under_test import add_kernel

from kernbench.kernels import KernelFault, prepare_launch


def vectors(n_allocated):
    memory = FlatMemory()
    x = memory.from_numpy("x", np.ones(n_allocated), "f32")
    y = memory.from_numpy("y", np.ones(n_allocated), "f32")
    out = memory.zeros("out", (n_allocated,), "f32")
    return memory, x, y, out


def test_adr0007_t14_out_of_bounds_load_names_kernel_program_tensor_offset_and_size():
    memory, x, y, out = vectors(100)
    before = memory.buffer.copy()
    launch = prepare_launch(add_kernel, (2,), (x, y, out, 200), {"BLOCK_SIZE": 128})

    with pytest.raises(KernelFault) as caught:
        run_grid(launch, FlatPort(memory))

    fault = caught.value
    assert (fault.kernel, fault.program_id, fault.tensor, fault.offset, fault.access_size) == (
        "add_kernel", (0, 0, 0), "x", 100 * 4, 4,
    )
    assert "add_kernel" in str(fault) and "'x'" in str(fault) and "offset 400" in str(fault)
    assert np.array_equal(memory.buffer, before), "a faulting program must not have written anything"


def test_adr0007_t15_out_of_bounds_store_is_caught_before_memory_changes():
    memory, x, y, out = vectors(256)
    small_out = memory.zeros("small_out", (130,), "f32")
    before = memory.buffer.copy()
    launch = prepare_launch(add_kernel, (2,), (x, y, small_out, 256), {"BLOCK_SIZE": 128})

    with pytest.raises(KernelFault) as caught:
        run_grid(launch, FlatPort(memory))

    fault = caught.value
    assert (fault.kernel, fault.program_id, fault.tensor, fault.offset, fault.access_size) == (
        "add_kernel", (1, 0, 0), "small_out", 130 * 4, 4,
    )
    written = memory.buffer != before
    start = small_out.address - 0x1000_0000
    assert written[start : start + 128 * 4].any() and not written[start + 128 * 4 :].any()


def test_adr0007_t16_masked_off_lanes_never_fault():
    memory, x, y, out = vectors(100)
    launch = prepare_launch(add_kernel, (1,), (x, y, out, 100), {"BLOCK_SIZE": 1024})
    run_grid(launch, FlatPort(memory))
    assert out.numpy().tolist() == [2.0] * 100
