"""DTensor's random numbers as PyTorch's `torch.distributed.tensor._random` makes them: an offset-based tracker.

A random op on a DTensor (`dropout`, `rand_like`, `randn_like`, `uniform_`,
`normal_`, and the `rand` / `randn` factories) draws its local part inside
`distribute_region`: the rank's generator of its device (or the op's
`generator=`) continues from its state `start` draws ahead, where `start`
is the linear index of the rank's shard (row-major over the shards of each
tensor dimension) times the first shard's elements, rounded up to 4 as
PyTorch rounds Philox offsets; after the op every rank's stream is the
global element count, rounded likewise, ahead of where it was. Ranks
holding the same shard — every rank, for a Replicate tensor — draw the same
numbers; different shards draw different ones, from one stream, as a GPU's
Philox counters give them.

One tracker per rank, as one per PyTorch process. It is made at the rank's
first random op on a DTensor, and then, as PyTorch's `run_state_sync`,
gives every rank rank 0's device stream by a broadcast of its state over
the world; `manual_seed(seed, device_mesh)` makes it without that broadcast
and seeds the rank's generators (`torch.manual_seed`), as PyTorch's does.
The numbers are PCG64's (kernbench's generators), offset by `advance`, not
Philox's.
"""

from __future__ import annotations

import weakref
from contextlib import contextmanager
from math import prod

import greenlet

from kernbench.dtensor.comm import issue
from kernbench.dtensor.errors import DTensorError
from kernbench.dtensor.placements import chunk_bounds
from kernbench.runtime_api.current_run import current_torch

_TRACKERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # a rank's greenlet -> its tracker


class OffsetBasedRNGTracker:
    """`OffsetBasedRNGTracker(device_mesh, run_state_sync=True)`: where a rank's random ops on DTensors draw from
    (see the module docstring); `distribute_region_enabled = False` makes them draw as plain ops do."""

    def __init__(self, device_mesh, run_state_sync: bool = True):
        self._mesh = device_mesh
        self.distribute_region_enabled = True
        if run_state_sync:
            _take_rank_0s_stream()

    @contextmanager
    def _distribute_region(self, mesh, placements, shape, generator=None):
        if not self.distribute_region_enabled:
            yield
            return
        start, end = _offsets(mesh, placements, tuple(shape))
        torch = current_torch()
        if generator is None:
            generator = torch.ahbm.default_generators[torch.ahbm.current_device()]
        with generator.offset_region(start, end):
            yield


def get_rng_tracker() -> OffsetBasedRNGTracker | None:
    """The calling rank's tracker (None before its first random op on a DTensor or `manual_seed`)."""
    return _TRACKERS.get(greenlet.getcurrent())


def set_rng_tracker(tracker: OffsetBasedRNGTracker) -> None:
    """Make `tracker` the calling rank's."""
    _TRACKERS[greenlet.getcurrent()] = tracker


def is_rng_supported_mesh(device_mesh) -> bool:
    """Whether DTensor's random ops are tracked on the mesh's devices: always, on a simulated device."""
    return True


def manual_seed(seed: int, device_mesh) -> None:
    """Seed the calling rank's generators with `seed` (torch.manual_seed) and make its tracker, with no broadcast
    of rank 0's stream: every rank of the mesh must pass the same seed (PyTorch does not check it either)."""
    if device_mesh.get_coordinate() is None:
        raise DTensorError("manual_seed requires the current rank to be a part of the device mesh otherwise DTensor "
                           "RNG state on the rank will not be initialized and the behavior of DTensor random ops is "
                           "undefined.")
    if get_rng_tracker() is None:
        set_rng_tracker(OffsetBasedRNGTracker(device_mesh, run_state_sync=False))
    current_torch().manual_seed(seed)


@contextmanager
def distribute_region(mesh, placements, shape, generator=None):
    """The block draws a random op's local part of a DTensor of global `shape` laid out as `placements` on
    `mesh`, from the calling rank's tracker (made, with its broadcast, if the rank has none)."""
    tracker = get_rng_tracker()
    if tracker is None:
        tracker = OffsetBasedRNGTracker(mesh)
        set_rng_tracker(tracker)
    with tracker._distribute_region(mesh, placements, shape, generator):
        yield


def _offsets(mesh, placements, shape: tuple) -> tuple[int, int]:
    """(start, end) draws of the calling rank's shard, as PyTorch's `_compute_rng_offsets`: start its shard's
    linear index times the first shard's elements, end the tensor's elements, both rounded up to 4."""
    coordinate = mesh.get_coordinate()
    index, count = [0] * len(shape), [1] * len(shape)
    first = list(shape)
    for mesh_dim, p in enumerate(placements):
        if p.is_shard():
            size = mesh.size(mesh_dim)
            index[p.dim] = index[p.dim] * size + coordinate[mesh_dim]
            count[p.dim] *= size
            first[p.dim] = chunk_bounds(first[p.dim], size, 0)[1]
    linear = 0
    for i, n in zip(index, count):
        linear = linear * n + i
    return -(-linear * prod(first) // 4) * 4, -(-prod(shape) // 4) * 4


def _take_rank_0s_stream() -> None:
    """Every rank's current device stream continues from rank 0's: its state broadcast over the world, as
    PyTorch's tracker does when it is made (a warning there when they differed)."""
    torch = current_torch()
    state = torch.ahbm.get_rng_state().to(f"cuda:{torch.ahbm.current_device()}")
    issue("broadcast", state, 0)
    torch.ahbm.set_rng_state(state.cpu())
