"""`DPPolicy`: how one tensor is spread over the cubes of a SIP and the PEs of each cube.

Two levels, each `replicate`, `column_wise` (split the last dimension) or
`row_wise` (split the first dimension). The cube level picks `num_cubes` cubes
(all of the SIP's when `None`) and gives each a part (or, for `replicate`, a
full copy); the PE level splits each cube's part over that cube's share of
`num_pes` PEs (all of them when `None`). Splits must be even: a shape that does
not divide is refused rather than padded, so every shard has the same size
and a PE-rank collective's chunk r is exactly shard r.

Placement is intra-device only (adr/0004-memory-and-placement.md): a policy
never spans SIPs; spreading over devices is what ranks and collectives are for.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod
from typing import ClassVar, Protocol

import numpy as np

from kernbench.errors import KernbenchError

MODES = ("replicate", "column_wise", "row_wise")


class PlacementError(KernbenchError):
    """A placement policy that is malformed or does not fit the tensor or the SIP."""


@dataclass(frozen=True)
class DPPolicy:
    """Where a tensor's data lives inside its SIP; validated on construction."""

    cube: str = "column_wise"
    pe: str = "column_wise"
    num_cubes: int | None = None
    num_pes: int | None = None
    address_interleaved: ClassVar[bool] = False  # the shards are where the data is, not a stand-in (`Placement`)

    def __post_init__(self) -> None:
        for level in ("cube", "pe"):
            mode = getattr(self, level)
            if mode not in MODES:
                raise PlacementError(f"DPPolicy({level}={mode!r}): unknown mode; expected one of {', '.join(MODES)}")
        for field in ("num_cubes", "num_pes"):
            count = getattr(self, field)
            if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 1):
                raise PlacementError(f"DPPolicy({field}={count!r}): expected a positive integer or None")

    @classmethod
    def over_pes(cls, num_pes: int, cubes_per_sip: int, pes_per_cube: int) -> "DPPolicy":
        """The last dimension split over exactly `num_pes` PEs, on the fewest cubes that share them evenly.

        What a PE-rank collective wants: chunk r of the last dimension on PE r.
        """
        for num_cubes in range(1, cubes_per_sip + 1):
            if num_pes % num_cubes == 0 and num_pes // num_cubes <= pes_per_cube:
                return cls(cube="column_wise", pe="column_wise", num_cubes=num_cubes, num_pes=num_pes)
        raise PlacementError(f"{num_pes} PEs cannot be spread evenly over the cubes of one SIP ({cubes_per_sip} "
                             f"cubes of {pes_per_cube} PEs): no number of cubes shares them evenly")

    def place(self, shape: tuple[int, ...], cubes_per_sip: int, pes_per_cube: int) -> "Placement":
        """Bind the policy to a tensor shape and a SIP; refuses what does not fit or split."""
        num_cubes = cubes_per_sip if self.num_cubes is None else self.num_cubes
        if num_cubes > cubes_per_sip:
            raise PlacementError(f"{self}: asks for {num_cubes} cubes but a SIP has {cubes_per_sip}")
        num_pes = num_cubes * pes_per_cube if self.num_pes is None else self.num_pes
        if num_pes % num_cubes:
            raise PlacementError(f"{self}: {num_pes} PEs cannot be shared evenly by {num_cubes} cubes")
        pes_each = num_pes // num_cubes
        if pes_each > pes_per_cube:
            raise PlacementError(
                f"{self}: asks for {pes_each} PEs in each of {num_cubes} cubes but a cube has {pes_per_cube}")
        shape = tuple(shape)
        cube_parts = _split(shape, self.cube, num_cubes, f"{self} over {num_cubes} cubes")
        shards = []
        for cube, (cube_index, replica) in enumerate(cube_parts):
            part_shape = _shape_of(cube_index, shape)
            for pe, (pe_index, _) in enumerate(_split(part_shape, self.pe, pes_each, f"{self} over {pes_each} PEs")):
                shards.append(Shard(cube=cube, pe=pe, index=_compose(cube_index, pe_index), replica=replica))
        return Placement(shape=shape, policy=self, shards=tuple(shards), num_cubes=num_cubes, pes_per_cube=pes_each)


class PlacementRule(Protocol):
    """What lays a tensor out in a SIP: a `DPPolicy`, or a topology's default rule (default.py)."""

    address_interleaved: ClassVar[bool]

    def place(self, shape: tuple[int, ...], cubes_per_sip: int, pes_per_cube: int) -> "Placement": ...


@dataclass(frozen=True)
class Shard:
    """The part of a tensor one PE of one cube holds (`index` slices the full tensor)."""

    cube: int
    pe: int
    index: tuple[slice, ...]
    replica: int

    def shape(self) -> tuple[int, ...]:
        return tuple(s.stop - s.start for s in self.index)

    def numel(self) -> int:
        return prod(self.shape())


@dataclass(frozen=True)
class Placement:
    """A rule bound to one tensor shape: its shards, in cube-then-PE order.

    `shape` is the space the shards' indices slice: the tensor's shape for a
    `DPPolicy`, its storage as one flat run for the interleaved default rule.
    """

    shape: tuple[int, ...]
    policy: PlacementRule
    shards: tuple[Shard, ...]
    num_cubes: int
    pes_per_cube: int

    @property
    def address_interleaved(self) -> bool:
        """Whether the shards stand for a GPU's fine-grained interleave of addresses over the cubes (the default
        rule `interleaved`) rather than say where each element is: a contiguous run of many elements then draws
        every cube alike, wherever it starts (`placed_dma.RunDmas.spread`)."""
        return self.policy.address_interleaved

    @property
    def replicas(self) -> int:
        return 1 + max(s.replica for s in self.shards)

    def cubes(self) -> tuple[int, ...]:
        return tuple(sorted({s.cube for s in self.shards}))

    def bytes_per_cube(self, itemsize: int) -> dict[int, int]:
        """HBM bytes each cube holds (a replicated tensor costs its full size on every cube)."""
        held: dict[int, int] = {}
        for shard in self.shards:
            held[shard.cube] = held.get(shard.cube, 0) + shard.numel() * itemsize
        return held

    def reinterpreted(self, itemsize: int, new_itemsize: int) -> "Placement":
        """The same bytes seen as elements of `new_itemsize` bytes (what `view_as_real` / `view_as_complex` make of
        a storage): the last dimension of the placement's space, and each shard's slice of it, scaled by
        itemsize / new_itemsize. Coarser elements round a shard's bounds down, so an element cut by a shard
        boundary belongs to the shard holding its first bytes (and a shard left with none is dropped)."""
        shape = self.shape or (1,)
        shards = []
        for shard in self.shards:
            index = shard.index or (slice(0, 1),)
            last = index[-1]
            scaled = slice(last.start * itemsize // new_itemsize, last.stop * itemsize // new_itemsize)
            if scaled.stop > scaled.start or not shards:
                shards.append(Shard(shard.cube, shard.pe, index[:-1] + (scaled,), shard.replica))
        return Placement(shape=shape[:-1] + (shape[-1] * itemsize // new_itemsize,), policy=self.policy,
                         shards=tuple(shards), num_cubes=self.num_cubes, pes_per_cube=self.pes_per_cube)

    def owners(self, flat_indices: np.ndarray, replica: int = 0) -> np.ndarray:
        """Index into `shards` of the shard (of the given replica) holding each flat element index."""
        coords = np.unravel_index(np.asarray(flat_indices, dtype=np.int64), self.shape) if self.shape else ()
        owner = np.full(np.shape(flat_indices), -1, dtype=np.int64)
        for i, shard in enumerate(self.shards):
            if shard.replica != replica:
                continue
            inside = np.ones(np.shape(flat_indices), dtype=bool)
            for axis, s in enumerate(shard.index):
                inside &= (coords[axis] >= s.start) & (coords[axis] < s.stop)
            owner[inside] = i
        return owner


def _split(shape: tuple[int, ...], mode: str, parts: int, what: str) -> list[tuple[tuple[slice, ...], int]]:
    """(index, replica) for each of `parts` parts of a tensor of `shape`."""
    whole = tuple(slice(0, n) for n in shape)
    if mode == "replicate":
        return [(whole, r) for r in range(parts)]
    if not shape:
        if parts == 1:
            return [(whole, 0)]
        raise PlacementError(f"{what}: a scalar cannot be split {mode}")
    axis = len(shape) - 1 if mode == "column_wise" else 0
    length = shape[axis]
    if length % parts:
        dim = "last" if mode == "column_wise" else "first"
        raise PlacementError(
            f"{what}: shape {shape} does not split {mode}: its {dim} dimension ({length}) is not divisible by {parts}")
    step = length // parts
    return [(whole[:axis] + (slice(k * step, (k + 1) * step),) + whole[axis + 1:], 0) for k in range(parts)]


def _shape_of(index: tuple[slice, ...], shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(s.stop - s.start for s in index) if shape else ()


def _compose(outer: tuple[slice, ...], inner: tuple[slice, ...]) -> tuple[slice, ...]:
    """An inner index (relative to the outer part) as an index of the whole tensor."""
    return tuple(slice(o.start + i.start, o.start + i.stop) for o, i in zip(outer, inner))
