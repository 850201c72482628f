"""`DeviceMesh` and `init_device_mesh`: the ranks of the world laid out as an n-dimensional array.

A mesh owns its process groups, one per mesh dimension for the calling rank
(the ranks that differ from it along that dimension only), as Megatron's
`parallel_state` owns its groups: DTensor's redistributions and the parallel
styles ask the mesh, never compute ranks themselves. Groups come from
`torch.distributed.new_group`, so every collective a DTensor issues is the
façade's, simulated and timed like any other. Each rank is one worker on a
SIP of its own (`spawn`, one worker per rank); a world of PE ranks, where a
worker drives several, has no per-rank local tensor to shard.
"""

from __future__ import annotations

import numpy as np

from kernbench.dtensor.errors import DTensorError
from kernbench.runtime_api.current_run import current_torch

_DEVICE_TYPES = ("cuda", "ahbm")


class DeviceMesh:
    """`DeviceMesh(device_type, mesh, *, mesh_dim_names=None)`: `mesh` an array of global ranks."""

    def __init__(self, device_type: str, mesh, *, mesh_dim_names=None, _init_backend: bool = True):
        self.device_type = _device_type(device_type)
        self.mesh = np.asarray(mesh.tolist() if hasattr(mesh, "tolist") else mesh, dtype=np.int64)
        if self.mesh.ndim == 0:
            raise DTensorError(f"DeviceMesh: mesh must be an array of ranks, got {mesh!r}")
        self.mesh_dim_names = None if mesh_dim_names is None else tuple(mesh_dim_names)
        _check_names(self.mesh_dim_names, self.mesh.shape)
        distributed = current_torch().distributed
        distributed.init_process_group()  # this worker joins the world (as each PyTorch process initializes it)
        world = distributed.get_world_size()
        if self.mesh.size > world:
            raise DTensorError(f"Mesh should not be bigger than default world size {world}, but found "
                               f"{self.mesh.size} ranks!")
        if sorted(self.mesh.reshape(-1).tolist()) != sorted(set(self.mesh.reshape(-1).tolist())) or \
                self.mesh.min() < 0 or self.mesh.max() >= world:
            raise DTensorError(f"DeviceMesh: mesh {self.mesh.tolist()} must hold distinct ranks of 0..{world - 1}")
        devices = current_torch().ahbm.device_count()
        if world > devices:
            raise DTensorError(f"DeviceMesh: the world has {world} ranks on {devices} devices; a DTensor needs one "
                               "rank per device (spawn one worker per rank)")
        self._rank = distributed.get_rank()
        where = np.argwhere(self.mesh == self._rank)
        self._coordinate = None if not len(where) else tuple(int(c) for c in where[0])
        self._groups = [self._group_along(dim, distributed) for dim in range(self.mesh.ndim)]

    def _group_along(self, dim: int, distributed):
        if self._coordinate is None:
            return None
        index = list(self._coordinate)
        index[dim] = slice(None)
        return distributed.new_group([int(r) for r in self.mesh[tuple(index)]])

    # ---- shape ---------------------------------------------------------------------------
    @property
    def ndim(self) -> int:
        return self.mesh.ndim

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.mesh.shape)

    def size(self, mesh_dim: int | None = None) -> int:
        """The number of ranks of the mesh, or along `mesh_dim`."""
        return int(self.mesh.size) if mesh_dim is None else int(self.mesh.shape[self._dim(mesh_dim)])

    # ---- the calling rank ----------------------------------------------------------------
    def get_rank(self) -> int:
        """The calling rank's global rank."""
        return self._rank

    def get_coordinate(self) -> list[int] | None:
        """The calling rank's index along each mesh dimension (None when the mesh does not hold it)."""
        return None if self._coordinate is None else list(self._coordinate)

    def get_local_rank(self, mesh_dim: int | str | None = None) -> int:
        """The calling rank's index along `mesh_dim` (which a mesh of several dimensions needs)."""
        dim = self._needed_dim(mesh_dim, "get_local_rank")
        return self._coordinate[dim]

    def get_group(self, mesh_dim: int | str | None = None):
        """The process group of `mesh_dim` (which a mesh of several dimensions needs) the calling rank is in."""
        return self._groups[self._needed_dim(mesh_dim, "get_group")]

    def get_all_groups(self) -> list:
        return list(self._groups)

    # ---- sub-meshes ----------------------------------------------------------------------
    def __getitem__(self, names) -> "DeviceMesh":
        """The sub-mesh of the named dimensions that holds the calling rank (`mesh["tp"]`, `mesh["dp", "tp"]`)."""
        if self.mesh_dim_names is None:
            raise DTensorError("Cannot slice a DeviceMesh without mesh_dim_names!")
        names = (names,) if isinstance(names, str) else tuple(names)
        for name in names:
            if name not in self.mesh_dim_names:
                raise DTensorError(f"Invalid mesh_dim_name {name!r} specified. Valid mesh_dim_names are "
                                   f"{self.mesh_dim_names}.")
        if names == self.mesh_dim_names:
            return self
        dims = [self.mesh_dim_names.index(name) for name in names]
        index = tuple(slice(None) if d in dims else self._coordinate[d] for d in range(self.ndim))
        sub = self.mesh[index].transpose([sorted(dims).index(d) for d in dims])
        return DeviceMesh(self.device_type, sub, mesh_dim_names=names)

    # ---- identity ------------------------------------------------------------------------
    def __eq__(self, other) -> bool:
        return isinstance(other, DeviceMesh) and (self.device_type, self.mesh_dim_names) == \
            (other.device_type, other.mesh_dim_names) and np.array_equal(self.mesh, other.mesh)

    def __hash__(self) -> int:
        return hash((self.device_type, self.mesh_dim_names, self.mesh.tobytes(), self.mesh.shape))

    def __repr__(self) -> str:
        names = "" if self.mesh_dim_names is None else f", mesh_dim_names={self.mesh_dim_names}"
        return f"DeviceMesh({self.device_type!r}, {self.mesh.tolist()}{names})"

    def _dim(self, mesh_dim: int | str) -> int:
        if isinstance(mesh_dim, str):
            if self.mesh_dim_names is None or mesh_dim not in self.mesh_dim_names:
                raise DTensorError(f"Invalid mesh_dim_name {mesh_dim!r} specified. Valid mesh_dim_names are "
                                   f"{self.mesh_dim_names}.")
            return self.mesh_dim_names.index(mesh_dim)
        if not -self.ndim <= mesh_dim < self.ndim:
            raise DTensorError(f"DeviceMesh: mesh_dim {mesh_dim} is out of range for a {self.ndim}-D mesh")
        return mesh_dim % self.ndim

    def _needed_dim(self, mesh_dim, call: str) -> int:
        if mesh_dim is None:
            if self.ndim > 1:
                raise DTensorError(f"Found the DeviceMesh have {self.ndim} dimensions. Optional kwarg `mesh_dim` "
                                   f"needs to be specified when device_mesh.ndim > 1 ({call}).")
            mesh_dim = 0
        if self._coordinate is None:
            raise DTensorError(f"DeviceMesh.{call}: rank {self._rank} is not in the mesh {self.mesh.tolist()}")
        return self._dim(mesh_dim)


def init_device_mesh(device_type: str, mesh_shape, *, mesh_dim_names=None) -> DeviceMesh:
    """A mesh of `mesh_shape` over ranks 0..n−1 in row-major order, the calling worker joining the process group
    (initialized if it is not), and its current device set to its rank (as PyTorch sets it, one device per
    rank)."""
    device_type = _device_type(device_type)
    shape = (mesh_shape,) if isinstance(mesh_shape, int) else tuple(mesh_shape)
    if mesh_dim_names is not None:
        _check_names(tuple(mesh_dim_names), shape)
    torch = current_torch()
    mesh = DeviceMesh(device_type, np.arange(int(np.prod(shape))).reshape(shape), mesh_dim_names=mesh_dim_names)
    rank = torch.distributed.get_rank()
    torch.ahbm.set_device(rank % torch.ahbm.device_count())
    return mesh


def _device_type(device_type) -> str:
    text = str(getattr(device_type, "type", device_type))
    if ":" in text:
        raise DTensorError(f"Device type with index is not supported but got {text}. If you maintained a "
                           "'torch.device' object, it's recommended to pass in 'device.type'.")
    if text not in _DEVICE_TYPES:
        raise DTensorError(f"init_device_mesh: device_type {text!r}: the simulated device is 'cuda' (or 'ahbm')")
    return text


def _check_names(names, shape) -> None:
    if names is None:
        return
    if len(set(names)) != len(names):
        raise DTensorError(f"Each mesh_dim_name must be unique. Found repeated mesh_dim_name in mesh_dim_names "
                           f"{names}")
    if len(names) != len(shape):
        raise DTensorError(f"mesh_shape and mesh_dim_names should have same length! Found len(mesh_dim_names): "
                           f"{len(names)} and len(mesh_shape):{len(shape)}.")
