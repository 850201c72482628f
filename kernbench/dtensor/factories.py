"""`torch.distributed.tensor.zeros` / `ones` / `empty` / `full` / `rand` / `randn`: DTensors made shard by shard.

Each rank makes only its local part (the chunk its placements give it) with
the run's factory of the same name, so nothing moves. Random values are drawn
through DTensor's RNG tracker (`random.py`), as PyTorch's are: a Replicate
random DTensor is the same on every rank, the shards of a sharded one differ.
"""

from __future__ import annotations

from contextlib import nullcontext

from kernbench.dtensor import random
from kernbench.dtensor.dtensor import DTensor, resolve_placements
from kernbench.dtensor.errors import DTensorError
from kernbench.dtensor.placements import chunk_bounds
from kernbench.runtime_api.current_run import current_torch


def _made(factory: str, size: tuple, fill, device_mesh, placements, dtype, requires_grad: bool) -> DTensor:
    if device_mesh is None:
        raise DTensorError(f"torch.distributed.tensor.{factory}: pass device_mesh= (kernbench keeps no current mesh)")
    shape = tuple(size[0]) if len(size) == 1 and isinstance(size[0], (tuple, list)) else tuple(size)
    placements = resolve_placements(placements, device_mesh, len(shape))
    local = list(shape)
    for mesh_dim, p in enumerate(placements):
        if p.is_partial():
            raise DTensorError(f"torch.distributed.tensor.{factory}: a Partial placement has no factory")
        if p.is_shard():
            start, stop = chunk_bounds(local[p.dim], device_mesh.size(mesh_dim), device_mesh.get_local_rank(mesh_dim))
            local[p.dim] = stop - start
    torch = current_torch()
    arguments = (tuple(local),) if fill is None else (tuple(local), fill)
    with random.distribute_region(device_mesh, placements, shape) if factory in ("rand", "randn") else nullcontext():
        made = getattr(torch, factory)(*arguments, dtype=dtype, device=f"cuda:{torch.ahbm.current_device()}")
    return DTensor(made.requires_grad_(requires_grad), device_mesh, placements, shape)


def zeros(*size, dtype=None, requires_grad: bool = False, device_mesh=None, placements=None, layout=None) -> DTensor:
    """A DTensor of zeros of the global `size`, laid out as `placements` over `device_mesh`."""
    return _made("zeros", size, None, device_mesh, placements, dtype, requires_grad)


def ones(*size, dtype=None, requires_grad: bool = False, device_mesh=None, placements=None, layout=None) -> DTensor:
    """A DTensor of ones of the global `size`, laid out as `placements` over `device_mesh`."""
    return _made("ones", size, None, device_mesh, placements, dtype, requires_grad)


def empty(*size, dtype=None, requires_grad: bool = False, device_mesh=None, placements=None, layout=None) -> DTensor:
    """An uninitialized DTensor of the global `size`, laid out as `placements` over `device_mesh`."""
    return _made("empty", size, None, device_mesh, placements, dtype, requires_grad)


def full(size, fill_value, *, dtype=None, requires_grad: bool = False, device_mesh=None, placements=None,
         layout=None) -> DTensor:
    """A DTensor of `fill_value` of the global `size`, laid out as `placements` over `device_mesh`."""
    return _made("full", (size,), fill_value, device_mesh, placements, dtype, requires_grad)


def rand(*size, dtype=None, requires_grad: bool = False, device_mesh=None, placements=None, layout=None) -> DTensor:
    """A DTensor of U[0, 1) values, each rank's part drawn through DTensor's RNG tracker."""
    return _made("rand", size, None, device_mesh, placements, dtype, requires_grad)


def randn(*size, dtype=None, requires_grad: bool = False, device_mesh=None, placements=None, layout=None) -> DTensor:
    """A DTensor of N(0, 1) values, each rank's part drawn through DTensor's RNG tracker."""
    return _made("randn", size, None, device_mesh, placements, dtype, requires_grad)
