"""ADR 0014, "Memcheck": every access of a kernel stays inside the tensor its pointer came from.

A pointer computed from a tensor argument is held to that tensor's
allocation, lane by active lane; an access outside it is a `KernelFault`
that reads like compute-sanitizer's report (kernel, program, address, lane,
tensor, argument, how far past its end or before its start, and what lies
there instead). Pointers made from integers are held to the live
allocations by the port, which names the nearest tensor. `memcheck=False`
is the opt-out; it changes nothing for a kernel that stays in bounds.
"""

from __future__ import annotations

import numpy as np
import pytest
import triton
import triton.language as tl
from flat_port import DeviceArray, FlatMemory, FlatPort, run_grid

from kernbench.kernels import KernelFault, PreparedLaunch, prepare_launch
from kernbench.kernels.library.matmul import matmul
from kernbench.kernels.library.vector_add import add
from kernbench.session import Session

MB = 1 << 20


@triton.jit
def shifted_copy(src_ptr, dst_ptr, n, shift, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(dst_ptr + offsets, tl.load(src_ptr + offsets + shift, mask=mask), mask=mask)


@triton.jit
def tile_fill(dst_ptr, shift, COLS, ROWS: tl.constexpr, BLOCK_COLS: tl.constexpr):
    """Program (i, j) fills tile (i, j) of a (2 ROWS) x COLS matrix; program (1, 2) is `shift` elements off."""
    i, j = tl.program_id(0), tl.program_id(1)
    rows = i * ROWS + tl.arange(0, ROWS)[:, None]
    cols = j * BLOCK_COLS + tl.arange(0, BLOCK_COLS)[None, :]
    off = tl.where((i == 1) & (j == 2), shift, 0)
    tl.store(dst_ptr + rows * COLS + cols - off, tl.full((ROWS, BLOCK_COLS), 9.0, tl.float32))


@triton.jit
def far_lanes_masked_off(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    """Lanes at or past `n` point a megabyte away, and are masked off."""
    offsets = tl.arange(0, BLOCK)
    inside = offsets < n
    far = tl.where(inside, offsets, offsets + (1 << 20))
    tl.store(dst_ptr + far, tl.load(src_ptr + far, mask=inside) + 1.0, mask=inside)


@triton.jit
def through_an_integer(src_ptr, dst_ptr, byte_shift, BLOCK: tl.constexpr):
    """A pointer made from an integer has no origin: only the port's check applies to it."""
    address = src_ptr.to(tl.int64, bitcast=True) + byte_shift
    pointer = address.to(tl.pointer_type(tl.float32), bitcast=True)
    offsets = tl.arange(0, BLOCK)
    tl.store(dst_ptr + offsets, tl.load(pointer + offsets))


@triton.jit
def atomic_past_the_end(counter_ptr, shift):
    tl.atomic_add(counter_ptr + shift, 1.0)


@triton.jit
def block_pointer_rows(src_ptr, dst_ptr, rows, cols, BLOCK_ROWS: tl.constexpr, BLOCK_COLS: tl.constexpr):
    """Copies a BLOCK_ROWS x BLOCK_COLS block, checking only the columns: rows past `rows` are accessed as addressed."""
    source = tl.make_block_ptr(src_ptr, (rows, cols), (cols, 1), (0, 0), (BLOCK_ROWS, BLOCK_COLS), (1, 0))
    target = tl.make_block_ptr(dst_ptr, (BLOCK_ROWS, cols), (cols, 1), (0, 0), (BLOCK_ROWS, BLOCK_COLS), (1, 0))
    tl.store(target, tl.load(source, boundary_check=(1,)), boundary_check=(1,))


def _run(fn, memcheck: bool = True, topology: str = "single_sip"):
    session = Session(topology, memcheck=memcheck)
    return session.run(fn, session.torch), session


@pytest.mark.quick
def test_adr0014_t20_a_load_far_past_its_tensor_into_a_neighbour_is_a_fault_naming_everything():
    # The case: 4 MB past a 4 KB tensor lies inside the next tensor, which a GPU would silently read.
    seen = {}

    def bench(torch):
        small = torch.full((1024,), 1.0, name="small")
        big = torch.full((4 * MB // 4,), 7.0, name="big")
        out = torch.zeros(1024, name="out")
        seen.update(small=small.data_ptr(), out=out)
        shifted_copy[(2,)](small, out, 1024, MB, BLOCK=512)  # 1 M elements: 4 MB past small's start
        torch.ahbm.synchronize()

    with pytest.raises(KernelFault) as caught:
        _run(bench)
    fault = caught.value
    assert (fault.kernel, fault.program_id, fault.access, fault.lane, fault.access_size) == (
        "shifted_copy", (0, 0, 0), "load", 0, 4)
    assert (fault.tensor, fault.argument, fault.tensor_bytes, fault.inside) == ("small", "src_ptr", 4096, "big")
    assert (fault.address, fault.offset) == (seen["small"] + 4 * MB, 4 * MB)
    assert str(fault) == (
        f"kernel 'shifted_copy' program (0, 0, 0): out-of-bounds 4-byte load at {seen['small'] + 4 * MB:#x} "
        f"(lane 0): {4 * MB - 4096} bytes past the end of tensor 'small' (argument 'src_ptr', 4096 bytes), "
        "inside tensor 'big'")
    assert "\n" not in str(fault)


def test_adr0014_t21_a_store_before_its_tensor_faults_before_writing_and_names_the_grid_coordinates_and_lane():
    def bench(torch):
        before = torch.full((MB // 4,), 5.0, name="before")  # 1 MB, allocated just below dst
        dst = torch.zeros(8, 64, name="dst")
        try:
            tile_fill[(2, 4)](dst, 1 << 17, 64, ROWS=4, BLOCK_COLS=16)  # program (1, 2) 512 KB below dst
            torch.ahbm.synchronize()
        except KernelFault as fault:
            return fault, before.numpy(), dst.data_ptr()
        raise AssertionError("no fault")

    (fault, before, dst_base), _ = _run(bench)
    assert (fault.kernel, fault.program_id, fault.access, fault.lane) == ("tile_fill", (1, 2, 0), "store", (0, 0))
    assert (fault.tensor, fault.argument, fault.inside) == ("dst", "dst_ptr", "before")
    expected_offset = (4 * 64 + 2 * 16 - (1 << 17)) * 4
    assert (fault.offset, fault.address) == (expected_offset, dst_base + expected_offset)
    assert f"{-expected_offset} bytes before the start of tensor 'dst' (argument 'dst_ptr', 2048 bytes)" in str(fault)
    assert (before == 5.0).all(), "the faulting store must not have written the tensor it fell into"


@pytest.mark.parametrize("replays", [False, True], ids=["interpreted", "replayed"])
def test_adr0014_t22_masked_off_lanes_are_not_accesses_however_far_they_point(replays, monkeypatch):
    monkeypatch.setattr(PreparedLaunch, "replays", replays)

    def bench(torch):
        x, out = torch.arange(100, dtype=torch.float32, name="x"), torch.zeros(100, name="out")
        neighbour = torch.full((MB,), 3.0, name="neighbour")
        far_lanes_masked_off[(1,)](x, out, 100, BLOCK=128)
        return out.numpy(), neighbour

    (result, _), _ = _run(bench)
    assert result.tolist() == [float(i + 1) for i in range(100)]


def test_adr0014_t23_a_pointer_made_from_an_integer_is_checked_against_live_tensors_naming_the_nearest():
    def bench(torch, shift_of):
        x, out = torch.ones(64, name="x"), torch.zeros(64, name="out")
        shift = shift_of(x.data_ptr(), out.data_ptr())
        try:
            through_an_integer[(1,)](x, out, shift, BLOCK=16)
            torch.ahbm.synchronize()
        except KernelFault as fault:
            return fault, x.data_ptr() + shift
        return None, x.data_ptr() + shift

    def fault_at(shift_of):
        return _run(lambda torch: bench(torch, shift_of))[0]

    # Inside x: no fault (the port alone checks it, as compute-sanitizer would).
    assert fault_at(lambda x, out: 32)[0] is None
    # Before x, the device's first tensor: the nearest is x; the pointer has no argument to name.
    fault, address = fault_at(lambda x, out: -4096)
    assert (fault.tensor, fault.offset, fault.address, fault.lane, fault.argument, fault.inside) == (
        "x", -4096, address, 0, None, None)
    assert str(fault).endswith(f"load at {address:#x} (lane 0): 4096 bytes before the start of tensor 'x' (256 bytes)")
    # 1 KB past out, the last tensor.
    fault, address = fault_at(lambda x, out: out - x + 256 + 1024)
    assert (fault.tensor, fault.offset) == ("out", 256 + 1024)
    assert str(fault).endswith("1024 bytes past the end of tensor 'out' (256 bytes)")
    # A misaligned pointer inside x.
    fault, address = fault_at(lambda x, out: 2)
    assert str(fault) == (f"kernel 'through_an_integer' program (0, 0, 0): misaligned 4-byte load at {address:#x} "
                          "(lane 0): byte offset 2 of tensor 'x' (256 bytes)")


def test_adr0014_t24_memcheck_off_reads_the_neighbour_as_a_gpu_would_but_unallocated_addresses_still_fault():
    def far_load(torch):
        small = torch.full((1024,), 1.0, name="small")
        big = torch.full((4 * MB // 4,), 7.0, name="big")
        out = torch.zeros(1024, name="out")
        shifted_copy[(2,)](small, out, 1024, MB, BLOCK=512)
        return out.numpy(), big  # big lives until the kernel has run

    (result, _), _ = _run(far_load, memcheck=False)
    assert (result == 7.0).all()

    def unallocated(torch):
        small, out = torch.ones(1024, name="small"), torch.zeros(1024, name="out")
        shifted_copy[(2,)](small, out, 1024, 1 << 30, BLOCK=512)  # 4 GB on: nothing is there
        torch.ahbm.synchronize()

    with pytest.raises(KernelFault, match=r"bytes past the end of tensor 'out' \(4096 bytes\)$"):
        _run(unallocated, memcheck=False)


@pytest.mark.parametrize("timing_only", [False, True], ids=["values", "timing only"])
def test_adr0014_t25_the_memcheck_changes_nothing_for_kernels_that_stay_in_bounds(timing_only):
    def kernels(torch):
        spread = torch.DPPolicy(cube="column_wise", pe="column_wise")
        x, y, out = (torch.randn(1 << 13, dp=spread, name=n) for n in ("x", "y", "out"))
        add(x, y, out, block_size=256)
        rows = torch.DPPolicy(cube="row_wise", pe="row_wise")
        a = torch.randn(192, 96, dtype="f16", dp=rows, name="A")
        b = torch.randn(96, 72, dtype="f16", name="B")
        c = torch.empty(192, 72, dtype="f16", dp=rows, name="C")
        matmul(a, b, c, block_m=32, block_n=32, block_k=64, group_m=4)  # masked K and N tails
        torch.ahbm.synchronize()
        return None if timing_only else [t.numpy().tobytes() for t in (out, c)]

    runs = []
    for memcheck in (True, False):
        session = Session("default", timing_only=timing_only, memcheck=memcheck)
        runs.append((session.run(kernels, session.torch), session.ctx.machine.oplog.to_json()))
    assert runs[0] == runs[1]


class ExtentArray(DeviceArray):
    """A flat-port tensor that names its allocation, so its pointers get an origin."""

    def __kernbench_extent__(self):
        return self.name, self.address, self.nbytes


def _flat_vectors(memory: FlatMemory, names_and_sizes):
    arrays = []
    for name, size in names_and_sizes:
        array = memory.from_numpy(name, np.arange(size, dtype=np.float32), "f32")
        array.__class__ = ExtentArray
        arrays.append(array)
    return arrays


@pytest.mark.parametrize("replays", [False, True], ids=["interpreted", "replayed"])
def test_adr0014_t26_a_port_that_checks_lanes_one_by_one_gets_every_lane_checked_by_the_bridge(replays):
    # The flat port accepts each lane that lies in any allocation and does not promise one allocation per
    # access, so the bridge checks every lane itself: here every lane of x + shift lies in y.
    def launch(memcheck):
        memory = FlatMemory()
        x, y, out = _flat_vectors(memory, (("x", 1024), ("y", 4096), ("out", 1024)))
        shift = (y.address - x.address) // 4
        prepared = prepare_launch(shifted_copy, (4,), (x, out, 1024, shift), {"BLOCK": 256})
        prepared.replays, prepared.memcheck = replays, memcheck
        run_grid(prepared, FlatPort(memory))
        return out

    out = launch(memcheck=False)
    assert out.numpy().tolist() == [float(i) for i in range(1024)], "without the memcheck, y is read"
    with pytest.raises(KernelFault) as caught:
        launch(memcheck=True)
    fault = caught.value
    assert (fault.program_id, fault.tensor, fault.argument, fault.offset, fault.lane, fault.tensor_bytes) == (
        (0, 0, 0), "x", "src_ptr", 8192, 0, 4096)


def test_adr0014_t27_block_pointers_and_atomics_are_held_to_their_tensor_too():
    def block_rows(torch):
        src = torch.ones(4, 16, name="src")
        after = torch.full((MB,), 2.0, name="after")
        dst = torch.zeros(8, 16, name="dst")
        block_pointer_rows[(1,)](src, dst, 4, 16, BLOCK_ROWS=8, BLOCK_COLS=16)  # rows 4..7 unchecked, past src
        torch.ahbm.synchronize()
        return after

    with pytest.raises(KernelFault) as caught:
        _run(block_rows)
    assert (caught.value.tensor, caught.value.argument, caught.value.offset, caught.value.lane) == (
        "src", "src_ptr", 256, (4, 0))

    def atomic(torch):
        counter = torch.zeros(4, name="counter")
        after = torch.zeros(MB, name="after")
        atomic_past_the_end[(1,)](counter, 1 << 15)  # 128 KB on: inside `after`
        torch.ahbm.synchronize()
        return after

    with pytest.raises(KernelFault) as caught:
        _run(atomic)
    fault = caught.value
    assert (fault.access, fault.tensor, fault.argument, fault.inside) == ("atomic_add", "counter", "counter_ptr",
                                                                          "after")
