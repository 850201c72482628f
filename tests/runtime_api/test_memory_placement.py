"""ADR 0004: device memory and DPPolicy placement."""

from __future__ import annotations

import gc

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from kernbench.machine.placed_dma import lanes_per_cube
from kernbench.policy import DPPolicy, PlacementError
from kernbench.policy.placement import MODES
from tests.runtime_api.closed_forms import PS_PER_S, ceil_div, host_to_cube_path, staircase_copy_ps


@pytest.mark.quick
def test_adr0004_t1_unknown_mode_fails_at_construction():
    with pytest.raises(PlacementError, match="unknown mode; expected one of replicate, column_wise, row_wise"):
        DPPolicy(cube="diagonal")
    with pytest.raises(PlacementError, match="num_pes=0"):
        DPPolicy(num_pes=0)


@pytest.mark.quick
def test_adr0004_t2_more_cubes_or_pes_than_the_sip_has_is_refused(session):
    topology = session.ctx.topology
    torch = session.torch
    with pytest.raises(PlacementError, match=f"asks for {topology.cubes_per_sip + 1} cubes but a SIP has {topology.cubes_per_sip}"):
        torch.empty(4, 64, dp=DPPolicy(num_cubes=topology.cubes_per_sip + 1))
    too_many = topology.pes_per_cube + 1
    with pytest.raises(PlacementError, match=f"asks for {too_many} PEs in each of 1 cubes but a cube has"):
        torch.empty(4, 64 * too_many, dp=DPPolicy(num_cubes=1, num_pes=too_many))


@pytest.mark.quick
def test_adr0004_t3_a_shape_that_does_not_split_is_refused(session):
    with pytest.raises(PlacementError, match=r"shape \(1, 30\) does not split column_wise: its last dimension \(30\) is not divisible by 4"):
        session.torch.empty(1, 30, dp=DPPolicy(cube="column_wise", num_cubes=4, num_pes=4))
    with pytest.raises(PlacementError, match="first dimension"):
        session.torch.empty(1, 32, dp=DPPolicy(cube="row_wise", num_cubes=2))


@settings(max_examples=60, deadline=None)
@given(cube=st.sampled_from(MODES), pe=st.sampled_from(MODES), num_cubes=st.sampled_from([1, 2, 4]),
       pes_each=st.sampled_from([1, 2, 8]), rows=st.sampled_from([8, 16]), cols=st.sampled_from([8, 32]))
@pytest.mark.quick
def test_adr0004_t4_every_replica_covers_the_tensor_exactly_once_per_pe_copy(cube, pe, num_cubes, pes_each, rows, cols):
    try:
        placement = DPPolicy(cube=cube, pe=pe, num_cubes=num_cubes, num_pes=num_cubes * pes_each).place((rows, cols), 4, 8)
    except PlacementError:
        assume(False)  # a shape that does not split is T3's case
    copies_per_replica = pes_each if pe == "replicate" else 1
    for replica in range(placement.replicas):
        coverage = np.zeros((rows, cols), dtype=int)
        for shard in placement.shards:
            if shard.replica == replica:
                coverage[shard.index] += 1
        assert (coverage == copies_per_replica).all()
    assert placement.replicas == (num_cubes if cube == "replicate" else 1)


@settings(max_examples=150, deadline=None)
@given(data=st.data(), cube=st.sampled_from(MODES), pe=st.sampled_from(MODES), num_cubes=st.sampled_from([1, 2, 4]),
       pes_each=st.sampled_from([1, 2]), shape=st.sampled_from([(8,), (8, 8), (4, 8), (2, 4, 8), (4, 2, 4)]))
def test_adr0004_t11_dmas_group_the_elements_they_move_by_the_cube_that_holds_them(data, cube, pe, num_cubes,
                                                                                   pes_each, shape):
    """`lanes_per_cube` (every DMA's split into one transfer per cube) against `Placement.owners`, element by
    element: blocks, runs and scattered indices, inside one box or across boxes, of every replica."""
    try:
        placement = DPPolicy(cube=cube, pe=pe, num_cubes=num_cubes, num_pes=num_cubes * pes_each).place(shape, 4, 8)
    except PlacementError:
        assume(False)  # a shape that does not split is T3's case
    size = int(np.prod(shape))
    kind = data.draw(st.sampled_from(["run", "block", "scattered"]))
    if kind == "run":
        first = data.draw(st.integers(0, size - 1))
        indices = slice(first, data.draw(st.integers(first + 1, size)))
        flat = np.arange(indices.start, indices.stop)
    elif kind == "block":  # a row-major box of the tensor, as a kernel's tile addresses it
        low = [data.draw(st.integers(0, extent - 1)) for extent in shape]
        high = [data.draw(st.integers(lo + 1, extent)) for lo, extent in zip(low, shape)]
        flat = np.ravel_multi_index(np.meshgrid(*[np.arange(lo, hi) for lo, hi in zip(low, high)], indexing="ij"),
                                    shape).reshape(-1)
        indices = flat
    else:
        flat = np.asarray(data.draw(st.lists(st.integers(0, size - 1), min_size=1, max_size=12)), dtype=np.int64)
        indices = flat
    replica = data.draw(st.integers(0, placement.replicas - 1))
    cube_of_element = np.array([placement.shards[o].cube for o in placement.owners(flat, replica)])
    seen = np.zeros(flat.size, dtype=int)
    for cube_index, lanes, count in lanes_per_cube(placement, indices, replica):
        lanes = np.arange(flat.size)[lanes]
        assert count == lanes.size > 0
        assert (cube_of_element[lanes] == cube_index).all()
        seen[lanes] += 1
    assert (seen == 1).all()


@pytest.mark.quick
def test_adr0004_t5_out_of_memory_names_tensor_size_and_free_space_and_frees_nothing(session):
    torch = session.torch
    capacity = session.ctx.topology.cube.hbm.capacity_bytes
    keep = torch.empty(1024, dtype="f32", name="kept")
    before = torch.ahbm.memory_allocated()
    too_big = capacity // 2 + 1  # f16 elements: just over one cube's capacity
    with pytest.raises(torch.ahbm.OutOfMemoryError) as caught:
        torch.empty(1, too_big, dtype="f16", name="huge")
    message = str(caught.value)
    assert "'huge'" in message and "free HBM per cube" in message and "cube 0:" in message and "sip0" in message
    assert torch.ahbm.memory_allocated() == before
    assert keep.numel() == 1024


@pytest.mark.quick
def test_adr0004_t6_capacity_is_charged_per_cube_replicas_on_every_cube(session):
    torch = session.torch
    cubes = session.ctx.topology.cubes_per_sip
    nbytes = 64 * 32 * 2
    kept = torch.empty(64, 32, dtype="f16", dp=DPPolicy(cube="replicate", pe="row_wise", num_pes=cubes))
    assert torch.ahbm.memory_allocated() == cubes * nbytes
    memory = session.ctx.machine.memory[0]
    assert memory.used == [nbytes] * cubes
    assert kept.placement.replicas == cubes


def test_adr0004_t7_freed_tensors_return_their_memory(session):
    torch = session.torch
    gc.freeze()  # the collection below looks at what the test made, not at every object of the test process
    try:
        t = torch.empty(128, 128, dtype="f32")
        assert torch.ahbm.memory_allocated() == 128 * 128 * 4
        del t
        gc.collect()
    finally:
        gc.unfreeze()
    assert torch.ahbm.memory_allocated() == 0
    assert torch.ahbm.max_memory_allocated() == 128 * 128 * 4


def test_adr0004_t8_addresses_map_back_to_their_tensor_and_guard_gaps_are_unmapped(session):
    torch = session.torch
    a = torch.empty(16, dtype="f32", name="a")
    b = torch.empty(16, dtype="f32", name="b")
    memory = session.ctx.machine.memory[0]
    assert memory.find(a.data_ptr() + 63).name == "a"
    assert memory.find(a.data_ptr() + 64) is None
    assert memory.find(b.data_ptr()).name == "b"
    on_sip1 = torch.empty(16, dtype="f32", device="ahbm:1")
    assert session.ctx.machine.memory[1].find(on_sip1.data_ptr()) is not None
    assert memory.find(on_sip1.data_ptr()) is None


FOUR_POLICIES = [
    None,
    DPPolicy(cube="column_wise", pe="column_wise", num_cubes=2, num_pes=4),
    DPPolicy(cube="replicate", pe="column_wise", num_pes=4),
    DPPolicy(cube="column_wise", pe="column_wise"),
]


def test_adr0004_t9_four_ranks_copy_in_and_read_back_with_closed_form_copy_times(session):
    torch = session.torch
    topology = session.ctx.topology
    measured: dict[int, int] = {}
    read_back: dict[int, np.ndarray] = {}

    def worker(rank):
        torch.ahbm.set_device(rank)
        values = (np.arange(32, dtype=np.float16) + rank).reshape(1, 32)
        device_tensor = torch.empty(1, 32, dtype="f16", dp=FOUR_POLICIES[rank], name=f"x{rank}")
        start = session.engine.now
        device_tensor.copy_(torch.from_numpy(values))
        measured[rank] = session.engine.now - start
        read_back[rank] = device_tensor.numpy()

    session.run(lambda: torch.multiprocessing.spawn(worker, nprocs=4))
    for rank in range(4):
        expected_values = (np.arange(32, dtype=np.float16) + rank).reshape(1, 32)
        np.testing.assert_array_equal(read_back[rank], expected_values)
        placement = DPPolicy(cube="row_wise", pe="row_wise", num_cubes=1, num_pes=1) if FOUR_POLICIES[rank] is None \
            else FOUR_POLICIES[rank]
        shards = placement.place((1, 32), topology.cubes_per_sip, topology.pes_per_cube).shards
        expected = staircase_copy_ps(topology, rank, [s.cube for s in shards], shards[0].numel() * 2)
        assert measured[rank] == expected, f"rank {rank}"


def test_adr0004_t10_one_shard_copy_is_latency_plus_bytes_over_bottleneck(session):
    torch = session.torch
    topology = session.ctx.topology
    nbytes = 1 << 20
    x = torch.empty(nbytes // 4, dtype="f32", dp=DPPolicy(cube="row_wise", pe="row_wise", num_cubes=1, num_pes=1))
    elapsed = []

    def copy_in():
        start = session.engine.now
        x.copy_(np.ones(nbytes // 4, dtype=np.float32))
        elapsed.append(session.engine.now - start)

    session.run(copy_in)
    latency, bandwidth = host_to_cube_path(topology, 0, 0)
    assert elapsed == [latency + ceil_div(nbytes * PS_PER_S, bandwidth)]
