"""`DTensor`: a tensor whose global value lies over a device mesh, each rank holding its local part.

As in PyTorch, a DTensor is a `Tensor` (a module registers it, an optimizer
takes it) whose shape is the global one, whose `placements` say how that
global value lies on each mesh dimension, and whose data is the rank's
local tensor. Every tensor method and operator on it, and every `torch.X` /
`F.X` function given one (the `__torch_function__` protocol,
`runtime_api/ops/overrides.py`), goes through one path: `dispatch.py`, which
asks the op's sharding rule (`rules/`) for the layouts, redistributes the
inputs (`redistribute.py`, the only place collectives are born), runs the op
on the local tensors and wraps the result.

Autograd runs on the local tensors, the redistributions being autograd
Functions with their backward twins, so `loss.backward()` through DTensors
runs the local backward ops and the backward collectives PyTorch issues;
`grad` of a DTensor is a DTensor of the same layout.
"""

from __future__ import annotations

from kernbench.dtensor.comm import backward_pass, issue
from kernbench.dtensor.device_mesh import DeviceMesh
from kernbench.dtensor.dispatch import dispatch
from kernbench.dtensor.errors import DTensorError
from kernbench.dtensor.grad_layout import record, resolve
from kernbench.dtensor.placements import Placement, Replicate, Shard, normalized
from kernbench.dtensor.redistribute import Redistribute, local_chunk, redistribute_local, scatter_chunks
from kernbench.runtime_api import autograd
from kernbench.runtime_api.current_run import current_torch
from kernbench.runtime_api.ops import overrides
from kernbench.runtime_api.tensor.core import Tensor

# Tensor methods that keep their own meaning on a DTensor (they read only the global shape and dtype).
_SHAPE_ONLY = ("dim", "size", "numel", "element_size", "ndim", "nbytes", "is_floating_point", "__len__")


class DTensor(Tensor):
    """A distributed tensor: `DTensor.from_local(...)`, `distribute_tensor(...)`, or an op on DTensors."""

    def __init__(self, local: Tensor, mesh: DeviceMesh, placements: tuple, shape: tuple):
        """Internal: a DTensor over `local` (already laid out as `placements`); PyTorch's constructor is private
        too — use `from_local` or `distribute_tensor`."""
        self._local_tensor = local
        self._mesh = mesh
        self._placements = tuple(placements)
        self.shape = tuple(shape)
        self.dtype, self.device, self._ctx = local.dtype, local.device, local._ctx
        self.name = f"DTensor[{local.name}]"
        self._grad_uses: list = []

    # ---- layout --------------------------------------------------------------------------
    @property
    def placements(self) -> tuple:
        return self._placements

    @property
    def device_mesh(self) -> DeviceMesh:
        return self._mesh

    def stride(self, dim: int | None = None):
        strides, step = [], 1
        for n in reversed(self.shape):
            strides.insert(0, step)
            step *= max(n, 1)
        return tuple(strides) if dim is None else strides[dim]

    def is_contiguous(self) -> bool:
        return True

    # ---- moving between layouts ----------------------------------------------------------
    @staticmethod
    def from_local(local_tensor, device_mesh: DeviceMesh | None = None, placements=None, *, run_check: bool = False,
                   shape=None, stride=None) -> "DTensor":
        """The DTensor whose part on this rank is `local_tensor`, laid out as `placements` (Replicate on every
        mesh dimension by default). The global shape is `shape`, else worked out from the local one as if every
        rank held an equal part. Differentiable: the gradient comes back as the local tensor's, moved to this
        layout (a Partial gradient all-reduced into a Replicate one)."""
        if isinstance(local_tensor, DTensor):
            raise DTensorError("DTensor.from_local: the local tensor is a DTensor already")
        mesh = device_mesh or _current_mesh()
        placements = resolve_placements(placements, mesh, local_tensor.ndim)
        local_tensor = _on_the_rank(local_tensor)
        if shape is None:
            full = list(local_tensor.shape)
            for mesh_dim, p in enumerate(placements):
                if p.is_shard():
                    full[p.dim] *= mesh.size(mesh_dim)
            shape = tuple(full)
        holder: list = []
        local = _FromLocal.apply(local_tensor, holder)
        out = DTensor(local, mesh, placements, tuple(shape))
        holder.append(out)
        if run_check:
            _check_replicas(out)
        return out

    def to_local(self, *, grad_placements=None) -> Tensor:
        """This rank's local tensor; its gradient is taken to lie as `grad_placements` (default: this layout,
        Partial read as Replicate)."""
        layout = normalized(self._placements) if grad_placements is None else \
            resolve_placements(grad_placements, self._mesh, self.ndim)
        record(self, layout)
        return self._local_tensor

    def redistribute(self, device_mesh: DeviceMesh | None = None, placements=None, *, async_op: bool = False,
                     forward_dtype=None, backward_dtype=None) -> "DTensor":
        """This DTensor laid out as `placements`: the collectives of `redistribute.py` on the mesh's groups."""
        mesh = device_mesh or self._mesh
        if mesh != self._mesh:
            raise DTensorError(f"redistribute: cannot move a DTensor from {self._mesh} to another mesh {mesh}")
        target = resolve_placements(placements, mesh, self.ndim)
        if target == self._placements:
            return self
        for p in target:
            if p.is_partial() and not any(q == p for q in self._placements) and p.reduce_op != "sum":
                raise DTensorError(f"redistribute: {p} is not supported (kernbench's Partial is a sum)")
        record(self, normalized(self._placements))
        holder: list = []
        local = Redistribute.apply(self._local_tensor, mesh, self._placements, target, self.shape, holder)
        out = DTensor(local, mesh, target, self.shape)
        holder.append(out)
        return out

    def full_tensor(self, *, grad_placements=None) -> Tensor:
        """The whole global value on every rank (the collectives that make it Replicate), as a plain tensor."""
        return self.redistribute(placements=[Replicate()] * self._mesh.ndim).to_local(grad_placements=grad_placements)

    # ---- autograd ------------------------------------------------------------------------
    @property
    def requires_grad(self) -> bool:
        return self._local_tensor.requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        self._local_tensor.requires_grad_(value)

    def requires_grad_(self, requires_grad: bool = True) -> "DTensor":
        self._local_tensor.requires_grad_(requires_grad)
        return self

    @property
    def grad_fn(self):
        return self._local_tensor.grad_fn

    @property
    def is_leaf(self) -> bool:
        return self._local_tensor.is_leaf

    @property
    def grad(self):
        grad = self._local_tensor.grad
        return None if grad is None else DTensor(grad, self._mesh, normalized(self._placements), self.shape)

    @grad.setter
    def grad(self, value) -> None:
        self._local_tensor.grad = value._local_tensor if isinstance(value, DTensor) else value

    @property
    def data(self) -> "DTensor":
        return self.detach()

    @data.setter
    def data(self, other: "DTensor") -> None:
        """`p.data = q`: p now shows q's local storage, dtype and device (what `Module.to` does to a parameter);
        q must be laid out as p is."""
        if not isinstance(other, DTensor) or (other._mesh, other._placements, other.shape) != \
                (self._mesh, self._placements, self.shape):
            raise DTensorError(f"{self.name}.data = ...: expected a DTensor of shape {self.shape} laid out as "
                               f"{self._placements} on {self._mesh}")
        local = self._local_tensor
        local.dtype, local.device = other.dtype, other.device  # as Module.to moves a plain tensor's (nn/module.py)
        local.data = other._local_tensor
        self.dtype, self.device = other.dtype, other.device

    @property
    def _allocation(self):
        return self._local_tensor._allocation

    @property
    def _host_storage(self):
        return self._local_tensor._host_storage

    def detach(self) -> "DTensor":
        return DTensor(self._local_tensor.detach(), self._mesh, self._placements, self.shape)

    def backward(self, gradient=None, retain_graph=None, create_graph: bool = False, inputs=None) -> None:
        """Backward from this DTensor: its local tensor's, the gradient (a DTensor, or ones) moved to this
        layout first."""
        if gradient is None:
            if self.numel() != 1:
                raise DTensorError(f"backward: grad can be implicitly created only for scalar outputs; the DTensor "
                                   f"has shape {self.shape}")
            gradient = self._local_tensor._new_like(self._local_tensor.shape, f"{self.name}.grad_seed").fill_(1)
        elif isinstance(gradient, DTensor):
            gradient = gradient.redistribute(self._mesh, normalized(self._placements))._local_tensor
        self._local_tensor.backward(gradient, retain_graph=retain_graph, create_graph=create_graph, inputs=inputs)

    # ---- the rest ------------------------------------------------------------------------
    def __repr__(self) -> str:
        return (f"DTensor(local_tensor={self._local_tensor.name} {tuple(self._local_tensor.shape)}, "
                f"device_mesh={self._mesh}, placements={self._placements}, shape={self.shape})")

    __str__ = __repr__

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        """A `torch.X` / `F.X` function given a DTensor: the op's sharding rule decides (`dispatch.py`)."""
        return dispatch(DTensor, func.__name__, func, args, kwargs or {})

    @property
    def allocation(self):
        raise DTensorError(f"{self.name}: a DTensor has no single allocation; pass its to_local() to kernels and "
                           "collectives")

    def __kernbench_pointer__(self):
        raise DTensorError(f"{self.name}: a DTensor cannot be passed to a kernel; pass its to_local()")


def _forwarded(name: str):
    """`DTensor.<name>`: the Tensor method of that name, through the dispatcher."""
    method = getattr(Tensor, name)

    def forwarded(self, *args, **kwargs):
        return dispatch(DTensor, name, method, (self, *args), kwargs)
    forwarded.__name__ = forwarded.__qualname__ = name
    return forwarded


def _forwarded_property(name: str):
    prop = getattr(Tensor, name)
    return property(lambda self: dispatch(DTensor, name, prop.fget, (self,), {}))


def _install_tensor_surface() -> None:
    """Every public Tensor method and operator not defined above goes through the dispatcher on a DTensor."""
    own = set(vars(DTensor))
    for name in dir(Tensor):
        if name in own or name in _SHAPE_ONLY or (name.startswith("_") and not _is_operator(name)):
            continue
        value = getattr(Tensor, name)
        if isinstance(value, property):
            setattr(DTensor, name, _forwarded_property(name))
        elif callable(value):
            setattr(DTensor, name, _forwarded(name))


def _is_operator(name: str) -> bool:
    return name.startswith("__") and name.endswith("__") and name[2:-2] in _OPERATORS


_OPERATORS = {"getitem", "setitem", "float", "int", "bool", "array", "invert", "neg", "pos", "abs",
              *(f"{prefix}{op}" for op in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and",
                                           "or", "xor", "lshift", "rshift") for prefix in ("", "r", "i")),
              "eq", "ne", "lt", "le", "gt", "ge"}

_install_tensor_surface()
overrides.register(DTensor)


class _FromLocal(autograd.Function):
    """Forward: the local tensor as the DTensor's (an alias). Backward: the gradient moved from the layout the
    DTensor's uses give it to the DTensor's own layout (Partial read as Replicate)."""

    @staticmethod
    def forward(ctx, local, output):
        ctx.output = output
        return local.detach()

    @staticmethod
    def backward(ctx, grad):
        out = ctx.output[0]
        with backward_pass():
            return redistribute_local(grad, out._mesh, resolve(out), normalized(out._placements), out.shape,
                                      backward=True), None


def resolve_placements(placements, mesh: DeviceMesh, ndim: int) -> tuple:
    """`placements` checked (one per mesh dimension, each a Placement) with negative Shard dims made positive;
    None is Replicate everywhere."""
    if placements is None:
        return (Replicate(),) * mesh.ndim
    placements = tuple(placements)
    if len(placements) != mesh.ndim:
        raise DTensorError(f"`placements` must have the same length as `device_mesh.ndim`! Found placements "
                           f"length: {len(placements)}, and device_mesh.ndim: {mesh.ndim}.")
    out = []
    for p in placements:
        if not isinstance(p, Placement):
            raise DTensorError(f"placements: expected Shard(dim), Replicate() or Partial(), got {p!r}")
        if p.is_shard():
            if not -ndim <= p.dim < max(ndim, 1):
                raise DTensorError(f"Shard({p.dim}): dimension out of range for a tensor of {ndim} dimensions")
            p = Shard(p.dim % ndim)
        out.append(p)
    return tuple(out)


def distribute_tensor(tensor, device_mesh: DeviceMesh | None = None, placements=None, *, src_data_rank: int | None = 0,
                      ) -> DTensor:
    """`tensor` (the whole value on every rank) laid out over the mesh as `placements`: rank `src_data_rank`'s
    value, as in PyTorch, scattered in chunks over a Shard's mesh dimension and broadcast over a Replicate's;
    with `src_data_rank=None` each rank keeps its own chunk and nothing moves. A leaf when `tensor` requires
    grad."""
    if isinstance(tensor, DTensor):
        raise DTensorError("distribute_tensor: the tensor is a DTensor already; use redistribute")
    mesh = device_mesh or _current_mesh()
    placements = resolve_placements(placements, mesh, tensor.ndim)
    requires_grad = tensor.requires_grad
    tensor = _on_the_rank(tensor.detach())
    with autograd.GradMode(tensor._ctx, False):
        local = tensor.detach()
        for mesh_dim, p in enumerate(placements):
            local = _from_source(local, mesh, mesh_dim, p, src_data_rank)
        if local._allocation is tensor._allocation:
            local = local.clone()  # a parameter made from it must not share the original's storage
    return DTensor(local.requires_grad_(requires_grad), mesh, placements, tuple(tensor.shape))


def _from_source(local, mesh: DeviceMesh, mesh_dim: int, placement, src_data_rank):
    n = mesh.size(mesh_dim)
    group, index = mesh.get_group(mesh_dim), mesh.get_local_rank(mesh_dim)
    if placement.is_partial():
        raise DTensorError("distribute_tensor: Partial placement is not supported (a whole tensor has no terms)")
    if src_data_rank is None or n == 1:
        return local_chunk(local, n, index, placement.dim) if placement.is_shard() else local
    if placement.is_shard():
        return scatter_chunks(local, group, n, index, placement.dim, src_data_rank)
    local = local.contiguous().clone()
    issue("broadcast", local, group=group, group_src=src_data_rank)
    return local


def _check_replicas(dtensor: DTensor) -> None:
    """`run_check=True`: the Replicate parts of every rank are the same (compared on the host, values only)."""
    if dtensor._ctx.timing_only:
        return
    local = dtensor._local_tensor
    for mesh_dim, p in enumerate(dtensor.placements):
        if p.is_replicate() and dtensor._mesh.size(mesh_dim) > 1:
            first = local.contiguous().clone()
            issue("broadcast", first, group=dtensor._mesh.get_group(mesh_dim), group_src=0)
            if not (first.numpy() == local.numpy()).all():
                raise DTensorError("DTensor.from_local(run_check=True): the Replicate local tensors differ between "
                                   "ranks")


def _on_the_rank(tensor: Tensor) -> Tensor:
    """`tensor` on the calling rank's device: a host tensor is copied there, as PyTorch moves a CPU tensor to the
    mesh's device type."""
    return tensor.to(f"cuda:{current_torch().ahbm.current_device()}") if tensor.device.is_host else tensor


def _current_mesh() -> DeviceMesh:
    raise DTensorError("no device_mesh given: pass the DeviceMesh from init_device_mesh")
