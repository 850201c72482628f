"""Programs of different launches interleave mid-kernel without sharing state."""

import greenlet
import numpy as np
import triton.language as tl
from flat_port import FlatMemory, FlatPort
from kernels_under_test import add_kernel, program_ids_kernel, softmax_kernel

from kernbench.kernels import prepare_launch


def yield_to_driver():
    greenlet.getcurrent().parent.switch()


def drive_alternately(programs):
    """Switch to each unfinished program in turn until all are done; count switches."""
    switches = 0
    while any(not g.dead for g in programs):
        for g in programs:
            if not g.dead:
                g.switch()
                switches += 1
    return switches


def test_adr0007_t17_two_launches_alternating_at_every_load_stay_independent():
    memory = FlatMemory()
    n = 256
    x = memory.from_numpy("x", np.arange(n), "f32")
    y = memory.from_numpy("y", np.full(n, 10.0), "f32")
    summed = memory.zeros("summed", (n,), "f32")
    rows = np.random.default_rng(17).standard_normal((2, 64)).astype(np.float32)
    src, dst = memory.from_numpy("src", rows, "f32"), memory.zeros("dst", (2, 64), "f32")

    add = prepare_launch(add_kernel, (2,), (x, y, summed, n), {"BLOCK_SIZE": 128})
    softmax = prepare_launch(softmax_kernel, (2,), (dst, src, 64, 64, 64), {"BLOCK_SIZE": 64})
    programs = [
        greenlet.greenlet(lambda l=launch, p=pid: l.run_program((p, 0, 0), FlatPort(memory, on_load=yield_to_driver)))
        for launch in (add, softmax)
        for pid in (1, 0)
    ]
    switches = drive_alternately(programs)

    assert switches > len(programs), "programs must have been suspended mid-kernel"
    assert summed.numpy().tolist() == (np.arange(n) + 10.0).tolist()
    expected = np.exp(rows - rows.max(axis=1, keepdims=True))
    np.testing.assert_allclose(dst.numpy(), expected / expected.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-5)


def test_adr0007_t18_interleaved_programs_see_their_own_program_id_and_grid():
    memory = FlatMemory()
    small, large = memory.zeros("small", (2, 6), "i32"), memory.zeros("large", (3, 6), "i32")
    launches = [prepare_launch(program_ids_kernel, (2,), (small,), {}), prepare_launch(program_ids_kernel, (3,), (large,), {})]

    class SwitchingPort(FlatPort):
        def store(self, addresses, values, mask):
            super().store(addresses, values, mask)
            yield_to_driver()

    programs = [
        greenlet.greenlet(lambda l=launch, p=pid: l.run_program((p, 0, 0), SwitchingPort(memory)))
        for launch in launches
        for pid in range(launch.grid[0])
    ]
    drive_alternately(programs)

    assert small.numpy().tolist() == [[p, 0, 0, 2, 1, 1] for p in range(2)]
    assert large.numpy().tolist() == [[p, 0, 0, 3, 1, 1] for p in range(3)]


def test_adr0007_t19_language_is_restored_when_no_program_runs():
    original_load, original_range = tl.load, tl.range
    memory = FlatMemory()
    x = memory.from_numpy("x", np.ones(4), "f32")
    seen_inside = []

    def record_and_yield():
        seen_inside.append(tl.load is not original_load)
        yield_to_driver()

    launch = prepare_launch(add_kernel, (1,), (x, x, x, 4), {"BLOCK_SIZE": 4})
    program = greenlet.greenlet(lambda: launch.run_program((0, 0, 0), FlatPort(memory, on_load=record_and_yield)))
    program.switch()
    assert tl.load is not original_load, "patched while a program is suspended"
    drive_alternately([program])

    assert seen_inside and all(seen_inside)
    assert tl.load is original_load and tl.range is original_range
