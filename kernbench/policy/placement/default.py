"""The placement of a tensor with no `DPPolicy`: the rule its topology states (`sip.default_placement`).

`interleaved` is a GPU's rule: every allocation is spread over all the
memory stacks, so ordinary code (`torch.empty(n, device="cuda")`, an op's
result) draws the whole machine's bandwidth without asking. `first_pe` is
the accelerator's: the tensor lives whole in cube 0, owned by PE 0, and
spreading it is something the bench asks for with `dp=`
(adr/0004-memory-and-placement.md, "Default placement").
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod
from typing import ClassVar

from kernbench.policy.placement.dp import DPPolicy, Placement, Shard
from kernbench.topology import Topology
from kernbench.topology.schema import DEFAULT_PLACEMENTS


@dataclass(frozen=True)
class Interleaved:
    """A tensor's storage dealt in address order over every cube of its SIP and every PE of each cube.

    The storage, seen as one flat run of elements, is cut into one run per
    PE (cube by cube, PE by PE; PE i of n gets elements ⌈i·len/n⌉ up to
    ⌈(i+1)·len/n⌉), so the cubes hold equal shares to within an element and
    any length places, divisible or not. The placement's shape is that flat
    run: its shards are slices of the storage, not boxes of the tensor's
    shape. Runs rather than a fine-grained hash of addresses, because the
    cost model's resource is a cube's HBM: a stream over the tensor draws
    every cube either way, and a tile a program moves stays one DMA per cube
    it touches. The runs stand for the hash (`address_interleaved`): a
    collective's chunk, one long run at a rank-dependent offset, is charged
    as the hash spreads it, over every cube alike (`placed_dma.RunDmas.spread`).
    """

    address_interleaved: ClassVar[bool] = True

    def place(self, shape: tuple[int, ...], cubes_per_sip: int, pes_per_cube: int) -> Placement:
        """Bind the rule to a tensor shape and a SIP: one shard per PE that gets at least one element."""
        length = prod(shape)
        units = cubes_per_sip * pes_per_cube
        shards = []
        for unit in range(units):
            first, stop = -(-unit * length // units), -(-(unit + 1) * length // units)
            if stop > first or (unit == 0 and length == 0):
                cube, pe = divmod(unit, pes_per_cube)
                shards.append(Shard(cube=cube, pe=pe, index=(slice(first, stop),), replica=0))
        cubes = len({shard.cube for shard in shards})
        return Placement(shape=(length,), policy=self, shards=tuple(shards), num_cubes=cubes,
                         pes_per_cube=pes_per_cube)


FIRST_PE = DPPolicy(cube="row_wise", pe="row_wise", num_cubes=1, num_pes=1)
INTERLEAVED = Interleaved()
_RULES = {"interleaved": INTERLEAVED, "first_pe": FIRST_PE}
assert set(_RULES) == set(DEFAULT_PLACEMENTS), "a rule the topology schema accepts has no placement here"


def default_policy(topology: Topology) -> DPPolicy | Interleaved:
    """The placement of a tensor with no policy on `topology`'s SIPs: what its `sip.default_placement` names."""
    return _RULES[topology.sip.default_placement]
