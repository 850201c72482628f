"""ADR 0004 T14-T18: a tensor with no DPPolicy is laid out by its topology's rule (`sip.default_placement`)."""

from __future__ import annotations

import numpy as np
import pytest

from kernbench.policy import DPPolicy, Interleaved
from kernbench.policy.placement import FIRST_PE
from kernbench.session import Session
from tests.runtime_api.closed_forms import staircase_copy_ps


@pytest.fixture
def h100() -> Session:
    return Session("h100")


@pytest.mark.parametrize("length", [1, 131, 1000, 132 * 64 + 5])
def test_adr0004_t14_on_h100_a_tensor_with_no_policy_is_dealt_over_every_cube_and_pe(h100, length):
    topology = h100.ctx.topology
    units = topology.pes_per_sip
    x = h100.torch.empty(length, dtype="f16")
    placement = x.placement
    assert isinstance(placement.policy, Interleaved)
    assert placement.shape == (length,)
    shards = placement.shards
    assert len(shards) == min(length, units)
    assert [shard.index[0].start for shard in shards] == [0] + [shard.index[0].stop for shard in shards[:-1]]
    assert shards[-1].index[0].stop == length
    assert {shard.numel() for shard in shards} <= {length // units, -(-length // units)}
    pes = [shard.cube * topology.pes_per_cube + shard.pe for shard in shards]
    assert pes == sorted(set(pes))  # in address order: cube by cube, PE by PE, each PE once
    if length >= units:
        assert {shard.cube for shard in shards} == set(range(topology.cubes_per_sip))


def test_adr0004_t14_a_two_dimensional_tensor_is_dealt_as_its_storage_and_keeps_its_values(h100):
    torch = h100.torch
    topology = h100.ctx.topology
    values = np.arange(8 * 132 * 3, dtype=np.float32).reshape(8, 132 * 3)
    out = {}

    def bench():
        x = torch.from_numpy(values).to("cuda")
        assert x.placement.shape == (values.size,)
        assert x.placement.bytes_per_cube(4) == {cube: values.nbytes // topology.cubes_per_sip
                                                 for cube in range(topology.cubes_per_sip)}
        out["sum"] = (x + x).sum(dim=1).numpy()
        out["zeros"] = torch.zeros(3, 5, device="cuda").numpy()
        out["arange"] = torch.arange(1000, device="cuda").reshape(10, 100).numpy()

    h100.run(bench)
    np.testing.assert_array_equal(out["sum"], (values + values).sum(axis=1))
    np.testing.assert_array_equal(out["zeros"], np.zeros((3, 5), dtype=np.float32))
    np.testing.assert_array_equal(out["arange"], np.arange(1000).reshape(10, 100))


def test_adr0004_t15_on_h100_the_copy_of_a_default_tensor_is_the_staircase_over_every_pe(h100):
    torch = h100.torch
    topology = h100.ctx.topology
    per_pe = 64  # f16 elements on each PE: the tensor divides evenly, so every shard is one size
    x = torch.empty(topology.pes_per_sip * per_pe, dtype="f16")
    elapsed = []

    def copy_in():
        start = h100.engine.now
        x.copy_(np.ones(x.numel(), dtype=np.float16))
        elapsed.append(h100.engine.now - start)

    h100.run(copy_in)
    cubes = [cube for cube in range(topology.cubes_per_sip) for _ in range(topology.pes_per_cube)]
    assert elapsed == [staircase_copy_ps(topology, 0, cubes, per_pe * 2)]


def test_adr0004_t16_default_yaml_keeps_a_tensor_with_no_policy_whole_on_cube_0_pe_0(session):
    torch = session.torch
    x = torch.empty(4, 64)
    y = torch.ones(4, 64) + 1
    for tensor in (x, y, x.t().clone()):
        placement = tensor.placement
        assert placement.policy == FIRST_PE
        assert placement.shape == tensor.shape
        assert [(shard.cube, shard.pe) for shard in placement.shards] == [(0, 0)]


def test_adr0004_t17_a_dppolicy_overrides_the_topologys_rule(h100):
    torch = h100.torch
    topology = h100.ctx.topology
    rows = DPPolicy(cube="row_wise", pe="row_wise", num_cubes=2, num_pes=2)
    x = torch.empty(4, 64, dp=rows)
    assert x.placement == rows.place((4, 64), topology.cubes_per_sip, topology.pes_per_cube)
    for made in (torch.empty_like(x), x.clone(), torch.zeros_like(x)):
        assert made.placement.policy == rows
    assert torch.empty_like(x, dp=FIRST_PE).placement.policy == FIRST_PE


def test_adr0004_t18_whatever_the_runtime_allocates_with_no_policy_takes_the_topologys_rule(h100):
    torch = h100.torch
    rows = DPPolicy(cube="row_wise", pe="row_wise", num_cubes=2, num_pes=2)
    x = torch.ones(4, 64, dp=rows)
    made = {"an op's result": x + 1, "a view's clone": x.t().clone(), "a gather": x[[0, 2]],
            "a factory": torch.empty(3), "a like of a default tensor": torch.empty_like(torch.empty(5))}
    for what, tensor in made.items():
        assert isinstance(tensor.placement.policy, Interleaved), what
