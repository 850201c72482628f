"""Atomics go to the port as one request per op, with Triton's results."""

import numpy as np
from flat_port import FlatMemory, FlatPort, run_grid
from kernels_under_test import atomic_add_kernel, atomic_cas_kernel, atomic_max_kernel

from kernbench.kernels import prepare_launch


def test_adr0007_t25_atomic_add_accumulates_every_lane_of_every_program():
    memory = FlatMemory()
    counter = memory.zeros("counter", (2,), "i32")
    values = memory.from_numpy("values", np.arange(8), "i32")
    port = FlatPort(memory)
    run_grid(prepare_launch(atomic_add_kernel, (3,), (counter, values), {"BLOCK": 8}), port)

    assert counter.numpy().tolist() == [3 * (0 + 2 + 4 + 6), 3 * (1 + 3 + 5 + 7)]
    assert port.calls["atomic_rmw"] == 3


def test_adr0007_t26_float_atomic_max_handles_negative_values():
    memory = FlatMemory()
    out = memory.from_numpy("out", np.array([-100.0]), "f32")
    values = memory.from_numpy("values", np.array([-7.5, -3.25, -9.0, -4.0]), "f32")
    run_grid(prepare_launch(atomic_max_kernel, (1,), (out, values), {"BLOCK": 4}), FlatPort(memory))
    assert out.numpy().tolist() == [-3.25]

    values_mixed = memory.from_numpy("mixed", np.array([-1.0, 2.5, 0.5, -8.0]), "f32")
    run_grid(prepare_launch(atomic_max_kernel, (1,), (out, values_mixed), {"BLOCK": 4}), FlatPort(memory))
    assert out.numpy().tolist() == [2.5]


def test_adr0007_t27_atomic_cas_lets_exactly_the_first_program_in():
    memory = FlatMemory()
    lock = memory.zeros("lock", (1,), "i32")
    old = memory.zeros("old", (4,), "i32")
    run_grid(prepare_launch(atomic_cas_kernel, (4,), (lock, old), {}), FlatPort(memory))

    assert lock.numpy().tolist() == [1]
    assert old.numpy().tolist() == [0, 1, 1, 1]
