"""`Tensor`: a host array or a placed allocation in a SIP's HBM, with torch's surface.

Host code is asynchronous to the device. Device work on a tensor (a copy, a
fill, a kernel, a collective) is enqueued on a stream, and the tensor keeps
the handles of writes still in flight. Every way for host code to see device
values is a *host-read barrier*: it waits for those writes, then moves the
bytes to the host with a timed DMA. The barrier methods are listed in
`HOST_READS` (filled by the `@host_read` decorator), and all of them reach the
device bytes only through `_read_to_host`; `tests/runtime_api` checks that no
other method of this class touches them. With `--timing-only` no values
exist, and every host read is a `ValuesNotComputed` error naming the tensor
and the call, never stale bytes.
"""

from __future__ import annotations

import functools
import weakref
from math import prod
from typing import TYPE_CHECKING

import numpy as np

from kernbench.dtypes import DType, resolve_dtype
from kernbench.machine import Transfer, hbm, host
from kernbench.machine.placed_dma import lanes_per_cube
from kernbench.policy import default_policy
from kernbench.runtime_api import autograd
from kernbench.runtime_api.layout import views
from kernbench.runtime_api.layout.boxes import box_span
from kernbench.runtime_api.layout.copies import copy_elements, copy_into, fill_into
from kernbench.runtime_api.device import CPU, DEVICE_TYPE, Device
from kernbench.runtime_api.ops.binding import TORCH_FUNCTIONS, TensorOps
from kernbench.runtime_api.ops.device_ops import index_add
from kernbench.runtime_api.ops.released import check_storages
from kernbench.runtime_api.errors import TensorError, ValuesNotComputed
from kernbench.runtime_api.tensor.moves import cuda_device, to_device
from kernbench.runtime_api.tensor.untyped_storage import UntypedStorage
from kernbench.runtime_api.unsupported import tensor_getattr
from kernbench.runtime_api.layout.views import Layout

if TYPE_CHECKING:
    from kernbench.machine.memory import Allocation

HOST_READS: dict[str, str] = {}


def host_read(method):
    """Register `method` as a host-read barrier entry point."""
    HOST_READS[method.__name__] = (method.__doc__ or "").strip().splitlines()[0]
    return method


class Tensor(TensorOps):
    """A tensor on the host (`device='cpu'`) or on a simulated device (`ahbm:N`): a view of a storage.

    Its elements are `layout` (shape, strides, offset; views.py) over a flat
    storage of elements: a placed HBM allocation for device tensors, a numpy
    array for host tensors. Views share their base's storage and its list of
    writes in flight, so a write through any view is seen, and waited for,
    through every other (adr/0015-views.md). `ctx` is the run's
    `RuntimeContext`. Its operators and the methods of torch's ops come from
    the op table (`TensorOps`, ops/binding.py).
    """

    def __init__(self, ctx, shape: tuple[int, ...], dtype: DType, device: Device, name: str,
                 *, allocation: "Allocation | None" = None, host_array: np.ndarray | None = None,
                 view_of: "Tensor | None" = None, layout: Layout | None = None):
        self._ctx = ctx
        self.dtype = dtype
        self.device = device
        self.name = name
        self._layout = layout or Layout.contiguous(tuple(shape))
        self.shape = self._layout.shape
        self._base = view_of
        self.requires_grad = False
        self.grad: Tensor | None = None
        self.grad_fn = None
        if view_of is not None:  # a view of another dtype sees the same bytes as its own elements (view_as_real)
            allocation, storage = view_of._allocation, view_of._host_storage
            self._allocation = None if allocation is None else allocation.reinterpreted(dtype.itemsize)
            self._host_storage = storage if storage is None or storage.dtype == dtype.numpy else \
                _elements_of(storage, dtype)
            self._pending_writes: list = view_of._pending_writes
        else:
            self._allocation = allocation
            self._host_storage = None if host_array is None else np.ascontiguousarray(host_array).reshape(-1)
            self._pending_writes = []

    # ---- metadata (no barrier: nothing here reads device values) ------------------------
    @property
    def ndim(self) -> int:
        return len(self.shape)

    def dim(self) -> int:
        return self.ndim

    def size(self, dim: int | None = None):
        return self.shape if dim is None else self.shape[views.wrap_dim(dim, self.ndim, "size")]

    def numel(self) -> int:
        return prod(self.shape)

    def element_size(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.numel() * self.dtype.itemsize

    def stride(self, dim: int | None = None):
        """Element strides of the view, as torch reports them."""
        strides = self._layout.strides
        return strides if dim is None else strides[views.wrap_dim(dim, self.ndim, "stride")]

    def storage_offset(self) -> int:
        """Where the view starts in its storage, in elements."""
        return self._layout.offset

    def is_contiguous(self) -> bool:
        return self._layout.is_contiguous()

    @property
    def is_ahbm(self) -> bool:
        return not self.device.is_host

    is_cuda = is_ahbm
    __getattr__ = tensor_getattr

    def to(self, *args, **kwargs) -> "Tensor":
        """torch's `.to(device)`, `.to(dtype)`, `.to(other)`: this tensor when nothing changes, else a copy."""
        return to_device(self, *args, **kwargs)

    def cuda(self, device=None, non_blocking: bool = False) -> "Tensor":
        """This tensor on an ahbm device (`cuda` is ahbm here): itself when it is there already."""
        return cuda_device(self, device, non_blocking)

    @property
    def placement(self):
        """How the tensor's storage is spread over its SIP's cubes and PEs (None for host tensors)."""
        return None if self._allocation is None else self._allocation.placement

    @property
    def allocation(self) -> "Allocation | None":
        """The HBM allocation holding the values (None for host tensors): what collectives address."""
        return self._allocation

    @property
    def _host_array(self) -> np.ndarray | None:
        """A host tensor's values as a numpy view of its storage (writable: writes reach the storage)."""
        storage = self._host_storage
        if storage is None:
            return None
        layout = self._layout
        return np.lib.stride_tricks.as_strided(storage[layout.offset:], layout.shape,
                                               tuple(s * storage.itemsize for s in layout.strides))

    def data_ptr(self) -> int:
        if self._allocation is None:
            raise TensorError(f"tensor {self.name!r} is on the host; data_ptr() is for device tensors")
        return self._allocation.base + self._layout.offset * self.dtype.itemsize

    def untyped_storage(self) -> UntypedStorage:
        """The bytes this tensor and its views share: their size, address, and `resize_(0)` to free them."""
        return UntypedStorage(self)

    def __kernbench_pointer__(self) -> tuple[int, str]:
        """The pointer a Triton kernel receives: the virtual address and the element type."""
        return self.data_ptr(), self.dtype.name

    def __kernbench_extent__(self) -> tuple[str, int, int]:
        """What a kernel may reach through that pointer: its allocation's name, base address and bytes (memcheck)."""
        allocation = self._allocation
        if allocation is None:
            raise TensorError(f"tensor {self.name!r} is on the host; kernels take device tensors")
        return allocation.name, allocation.base, allocation.nbytes

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    # ---- views (no data moves; views.py has the rules) -----------------------------------
    def _viewed(self, layout: Layout, what: str, dtype: DType | None = None) -> "Tensor":
        """A view of this tensor's storage with `layout`, its elements of `dtype` (default: this tensor's; another
        dtype's layout counts in its own elements)."""
        return Tensor(self._ctx, layout.shape, dtype or self.dtype, self.device, f"{self.name}.{what}", view_of=self,
                      layout=layout)

    def _view(self, transform, what: str, *, injective: bool = True) -> "Tensor":
        """The view `transform(layout)` of this tensor, recorded for autograd (its backward undoes the view)."""
        out = self._viewed(transform(self._layout), what)
        return autograd.record(out, what, (self,), autograd.view_backward(self, transform, injective))

    def view(self, *shape) -> "Tensor":
        """The same storage seen with `shape`; an error where no strides can express it (use reshape)."""
        shape = views.infer_shape(shape, self.numel(), "view")
        if views.view(self._layout, shape) is None:
            raise TensorError(f"view size is not compatible with input tensor's size and stride (shape {self.shape}, "
                              f"strides {self.stride()}); use .reshape(...) instead")
        return self._view(lambda layout: views.view(layout, shape), "view")

    def reshape(self, *shape) -> "Tensor":
        """A view with `shape` where one exists, else a contiguous copy (as torch)."""
        shape = views.infer_shape(shape, self.numel(), "reshape")
        if views.view(self._layout, shape) is None:
            return self.contiguous().view(shape)
        return self._view(lambda layout: views.view(layout, shape), "reshape")

    def view_as(self, other: "Tensor") -> "Tensor":
        """`view(other.shape)`."""
        return self.view(other.shape)

    def unflatten(self, dim: int, sizes) -> "Tensor":
        """Dim `dim` seen as the dims `sizes` (one may be -1): a view where strides allow, else a copy."""
        dim = views.wrap_dim(dim, self.ndim, "unflatten")
        sizes = views.infer_shape(tuple(sizes), self.shape[dim], "unflatten")
        return self.reshape(self.shape[:dim] + tuple(sizes) + self.shape[dim + 1:])

    def repeat(self, *sizes) -> "Tensor":
        """This tensor tiled `sizes` times along each dim (new leading dims for extra sizes): a broadcast view,
        then one contiguous copy."""
        sizes = tuple(sizes[0]) if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)) else sizes
        if len(sizes) < self.ndim:
            raise TensorError(f"Number of dimensions of repeat dims ({len(sizes)}) can not be smaller than number of "
                              f"dimensions of tensor ({self.ndim})")
        shape = (1,) * (len(sizes) - self.ndim) + self.shape
        spread = self.reshape(tuple(n for d in shape for n in (1, d)))
        tiled = spread.expand(tuple(n for times, d in zip(sizes, shape) for n in (times, d)))
        return tiled.reshape(tuple(times * d for times, d in zip(sizes, shape)))

    def is_floating_point(self) -> bool:
        """Whether the dtype is a floating type."""
        return self.dtype.is_floating_point

    def is_complex(self) -> bool:
        """Whether the dtype is a complex type."""
        return self.dtype.is_complex

    @property
    def real(self) -> "Tensor":
        """The real parts, as a view (`torch.real`): writing it writes this tensor."""
        return TORCH_FUNCTIONS["real"](self)

    @property
    def imag(self) -> "Tensor":
        """The imaginary parts of a complex tensor, as a view (`torch.imag`): writing it writes this tensor."""
        return TORCH_FUNCTIONS["imag"](self)

    def new_empty(self, *size, dtype=None, device=None, requires_grad: bool = False) -> "Tensor":
        """An uninitialized tensor of `size`, this tensor's dtype and device unless given."""
        shape = tuple(size[0]) if len(size) == 1 and isinstance(size[0], (tuple, list)) else tuple(size)
        where = self.device if device is None else self._ctx.parse_device(device)
        out = Tensor._make(self._ctx, shape, resolve_dtype(dtype or self.dtype), where, self._ctx.next_tensor_name())
        return out.requires_grad_() if requires_grad else out

    def new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad: bool = False) -> "Tensor":
        """A tensor of `size` filled with `fill_value` (an HBM fill), this tensor's dtype and device unless given."""
        return self.new_empty(size, dtype=dtype, device=device).fill_(fill_value).requires_grad_(requires_grad)

    def new_zeros(self, *size, dtype=None, device=None, requires_grad: bool = False) -> "Tensor":
        """Zeros of `size` (an HBM fill), this tensor's dtype and device unless given."""
        return self.new_empty(*size, dtype=dtype, device=device).fill_(0).requires_grad_(requires_grad)

    def new_ones(self, *size, dtype=None, device=None, requires_grad: bool = False) -> "Tensor":
        """Ones of `size` (an HBM fill), this tensor's dtype and device unless given."""
        return self.new_empty(*size, dtype=dtype, device=device).fill_(1).requires_grad_(requires_grad)

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> "Tensor":
        start, end = views.wrap_dim(start_dim, self.ndim, "flatten"), views.wrap_dim(end_dim, self.ndim, "flatten")
        if not self.shape:
            return self.reshape(1)
        if start > end:
            raise TensorError("flatten() has invalid args: start_dim cannot come after end_dim")
        return self.reshape(self.shape[:start] + (-1,) + self.shape[end + 1:])

    def permute(self, *dims) -> "Tensor":
        dims = tuple(dims[0]) if len(dims) == 1 and isinstance(dims[0], (tuple, list)) else dims
        return self._view(lambda layout: views.permute(layout, dims), "permute")

    def transpose(self, dim0: int, dim1: int) -> "Tensor":
        return self._view(lambda layout: views.transpose(layout, dim0, dim1), "transpose")

    def t(self) -> "Tensor":
        if self.ndim > 2:
            raise TensorError(f"t() expects a tensor of at most 2 dimensions, got {self.ndim}; use .mT")
        return self.transpose(0, -1) if self.ndim == 2 else self

    @property
    def T(self) -> "Tensor":
        return self.permute(tuple(reversed(range(self.ndim))))

    @property
    def mT(self) -> "Tensor":
        return self.transpose(-2, -1)

    def expand(self, *sizes) -> "Tensor":
        return self._view(lambda layout: views.expand(layout, sizes), "expand", injective=False)

    def expand_as(self, other: "Tensor") -> "Tensor":
        return self.expand(other.shape)

    def narrow(self, dim: int, start: int, length: int) -> "Tensor":
        return self._view(lambda layout: views.narrow(layout, dim, start, length), "narrow")

    def select(self, dim: int, index: int) -> "Tensor":
        return self._view(lambda layout: views.select(layout, dim, index), "select")

    def squeeze(self, dim=None) -> "Tensor":
        return self._view(lambda layout: views.squeeze(layout, dim), "squeeze")

    def unsqueeze(self, dim: int) -> "Tensor":
        return self._view(lambda layout: views.unsqueeze(layout, dim), "unsqueeze")

    def split(self, split_size_or_sections, dim: int = 0) -> tuple["Tensor", ...]:
        dim = views.wrap_dim(dim, self.ndim, "split")
        pieces, start = [], 0
        for size in views.split_sizes(self.shape[dim], split_size_or_sections, "split"):
            pieces.append(self.narrow(dim, start, size))
            start += size
        return tuple(pieces)

    def tensor_split(self, indices_or_sections, dim: int = 0) -> tuple["Tensor", ...]:
        """Views split along `dim` into n nearly equal parts (the first `size % n` one longer), or at the given
        indices (as numpy.array_split)."""
        size = self.shape[views.wrap_dim(dim, self.ndim, "tensor_split")]
        if isinstance(indices_or_sections, int):
            n = indices_or_sections
            if n <= 0:
                raise TensorError(f"tensor_split expected at least 1 section, got {n}")
            return self.split([size // n + (i < size % n) for i in range(n)], dim)
        edges = [0, *(min(max(0, int(i) + size if int(i) < 0 else int(i)), size) for i in indices_or_sections), size]
        return tuple(self.narrow(dim, start, max(0, stop - start)) for start, stop in zip(edges, edges[1:]))

    def movedim(self, source, destination) -> "Tensor":
        """A view with dims `source` moved to positions `destination` (ints or sequences), the rest in order."""
        sources = [views.wrap_dim(s, self.ndim, "movedim") for s in ((source,) if isinstance(source, int) else source)]
        targets = [views.wrap_dim(d, self.ndim, "movedim")
                   for d in ((destination,) if isinstance(destination, int) else destination)]
        rest = iter(d for d in range(self.ndim) if d not in sources)
        placed = dict(zip(targets, sources))
        return self.permute(tuple(placed[i] if i in placed else next(rest) for i in range(self.ndim)))

    def chunk(self, chunks: int, dim: int = 0) -> tuple["Tensor", ...]:
        return self.split(views.chunk_sizes(self.shape[views.wrap_dim(dim, self.ndim, "chunk")], chunks), dim)

    def unbind(self, dim: int = 0) -> tuple["Tensor", ...]:
        return tuple(self.select(dim, i) for i in range(self.shape[views.wrap_dim(dim, self.ndim, "unbind")]))

    def contiguous(self) -> "Tensor":
        """This tensor if it is contiguous, else a contiguous copy (enqueued like any copy)."""
        return self if self.is_contiguous() else self.clone()

    def __getitem__(self, key) -> "Tensor":
        """A view for basic indexing (ints, slices, None, ...); a gathered copy for advanced indexing."""
        if views.basic_index(self._layout, key) is not None:
            return self._view(lambda layout: views.basic_index(layout, key), "index")
        key = self._resolved(key)
        selected = self._selected(key)
        out = self._new_like(selected.shape, f"{self.name}.gather")
        copy_elements(out, None, self, selected, non_blocking=True)
        return autograd.record(out, "index", (self,), functools.partial(_gather_backward, self, key))

    def __setitem__(self, key, value) -> None:
        """Write `value` (a number, a tensor or an array, broadcast) into the indexed elements, as device work."""
        autograd.check_in_place(self, "__setitem__", (value,))
        layout = views.basic_index(self._layout, key)
        if layout is not None:
            self._viewed(layout, "index").copy_(value, non_blocking=True)
            return
        copy_elements(self, self._selected(self._resolved(key)), value, None, non_blocking=True)

    @staticmethod
    def _resolved(key):
        """`key` with index tensors read to the host: the simulator needs the indices to know what moves."""
        if isinstance(key, tuple):
            return tuple(item._read_to_host("indexing with a tensor") if isinstance(item, Tensor) else item
                         for item in key)
        return key._read_to_host("indexing with a tensor") if isinstance(key, Tensor) else key

    def _selected(self, key) -> np.ndarray:
        """Storage elements that advanced indexing `key` picks, in the result's shape (numpy's rules)."""
        try:
            return self._layout.indices()[key]
        except IndexError as error:
            raise TensorError(f"indexing {self.name!r} of shape {self.shape}: {error}") from None

    def _new_like(self, shape, name: str) -> "Tensor":
        """A new contiguous tensor of `shape` and this dtype, on this device (the default placement)."""
        return Tensor._make(self._ctx, shape, self.dtype, self.device, name)

    @staticmethod
    def _make(ctx, shape, dtype: DType, device: Device, name: str, *, policy=None,
              host_array: np.ndarray | None = None) -> "Tensor":
        """A new contiguous tensor of run `ctx`: on the host holding `host_array` (uninitialized when None), or
        allocated on `device` under `policy` (the default placement when None).

        The op table's rows and the moves between devices make their results
        through a tensor they hold (`operand._make`), so that they need not
        import this module, which imports them.
        """
        if device.is_host:
            values = np.empty(shape, dtype=dtype.numpy) if host_array is None else host_array
            return Tensor(ctx, shape, dtype, CPU, name, host_array=values)
        return device_tensor(ctx, shape, dtype, device.index, policy, name)

    # ---- host reads ---------------------------------------------------------------------
    @host_read
    def numpy(self) -> np.ndarray:
        """The values as a numpy array (a copy, for a device tensor)."""
        return self._read_to_host("numpy()")


    @host_read
    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        """The values for `np.asarray(tensor)`."""
        values = self._read_to_host("np.asarray()")
        return values if dtype is None else values.astype(dtype)

    @host_read
    def item(self):
        """The value of a one-element tensor as a Python number."""
        if self.numel() != 1:
            raise TensorError(f"item() needs a one-element tensor; {self.name!r} has shape {self.shape}")
        return self._read_to_host("item()").reshape(()).item()

    @host_read
    def __float__(self) -> float:
        """float(tensor) of a one-element tensor."""
        return float(self._one_value("float()"))

    @host_read
    def __int__(self) -> int:
        """int(tensor) of a one-element tensor."""
        return int(self._one_value("int()"))

    @host_read
    def __bool__(self) -> bool:
        """bool(tensor) of a one-element tensor (as an `if` uses it)."""
        return bool(self._one_value("bool()"))

    def _one_value(self, call: str):
        if self.numel() != 1:
            raise TensorError(f"{call} needs a one-element tensor; {self.name!r} has shape {self.shape}")
        return self._read_to_host(call).reshape(()).item()

    @host_read
    def tolist(self):
        """The values as nested Python lists."""
        return self._read_to_host("tolist()").tolist()

    @host_read
    def cpu(self) -> "Tensor":
        """A host copy of the tensor."""
        return self if self.device.is_host else self._ctx_host_tensor(self._read_to_host("cpu()"))

    @host_read
    def __repr__(self) -> str:
        """torch-style text of the values."""
        values = self._read_to_host("repr()")
        body = np.array2string(values.astype(np.float64) if self.dtype.name == "bf16" else values,
                               separator=", ", prefix="tensor(")
        extras = "" if self.device.is_host else f", device='{self.device}'"
        return f"tensor({body}{extras}, dtype={self.dtype!r})"

    __str__ = __repr__

    def _ctx_host_tensor(self, values: np.ndarray) -> "Tensor":
        return Tensor(self._ctx, values.shape, self.dtype, CPU, self._ctx.next_tensor_name("host"),
                      host_array=values)

    def _read_to_host(self, call: str) -> np.ndarray:
        """Wait for in-flight writes, then DMA the values to the host (the only host path to device bytes).

        `call` is the user's call that reads, named in the timing-only error.
        A view that is its whole storage moves shard by shard; any other view
        moves only its own elements, one DMA per cube holding some of them.
        """
        if self._host_storage is not None:
            return self._host_array
        check_storages((self,), call)
        self._ctx.block_on(self._pending_writes)  # first, so a failure of the work that wrote it shows
        self._pending_writes.clear()
        if self._ctx.timing_only:
            raise ValuesNotComputed(f"values are not computed with --timing-only: tensor {self.name!r} "
                                    f"({self.device}) read by {call}; check torch.is_timing_only() to skip it")
        sip = self.device.index
        if self._is_whole_storage():
            out = np.empty(self.placement.shape, dtype=self.dtype.numpy)
            transfers = [Transfer(src=hbm(sip, shard.cube), dst=host(), nbytes=shard.numel() * self.dtype.itemsize,
                                  read=functools.partial(self._device_read, shard.index),
                                  write=functools.partial(out.__setitem__, shard.index))
                         for shard in self._nearest_replica(cube=0)]
        else:
            out = np.empty(self.numel(), dtype=self.dtype.numpy)
            indices = self._layout.indices().reshape(-1)
            transfers = [Transfer(src=hbm(sip, cube), dst=host(), nbytes=count * self.dtype.itemsize,
                                  read=functools.partial(self._device_gather, indices[lanes]),
                                  write=functools.partial(out.__setitem__, lanes))
                         for cube, lanes, count in self.element_groups(indices, near_cube=0)]
        machine = self._ctx.machine
        read = self._ctx.engine.spawn(machine.run_transfers, transfers, label=f"read {self.name} to host",
                                      data=True, name=f"host read of {self.name}")
        self._ctx.block_on([read])
        return out.reshape(self.shape)

    # ---- device-side data effects (run by the machine at the op's simulated time) ---------
    def _is_whole_storage(self) -> bool:
        """Whether this view is its allocation's elements in order (what shard-by-shard paths address)."""
        allocation = self._allocation
        return (self._layout.offset == 0 and self._layout.is_contiguous() and allocation.itemsize == self.dtype.itemsize
                and self.numel() * self.dtype.itemsize == allocation.nbytes)

    def element_groups(self, indices: np.ndarray, near_cube: int):
        """(cube, lanes, count) per cube holding some of the storage elements `indices`, from the nearest replica."""
        replica = self._ctx.machine.nearest_replica(self.placement, self.device.index, near_cube)
        return lanes_per_cube(self.placement, indices, replica)

    def _device_values(self, index: tuple[slice, ...]) -> np.ndarray:
        """The storage in its placement's shape, holding its values at least inside the box `index`."""
        shape = self.placement.shape
        first, stop, _ = box_span(shape, index)
        return self._allocation.storage.typed(self.dtype.numpy, slice(first, stop)).reshape(shape)

    def _device_read(self, index) -> np.ndarray:
        return self._device_values(index)[index].copy()

    def _device_write(self, index, values) -> None:
        self._device_values(index)[index] = values

    def _device_gather(self, indices: np.ndarray) -> np.ndarray:
        """The storage elements `indices` (a copy), for views and gathers."""
        return self._allocation.storage.typed(self.dtype.numpy, indices)[indices]

    def _device_scatter(self, indices: np.ndarray, values) -> None:
        self._allocation.storage.typed(self.dtype.numpy, indices)[indices] = values

    def _device_fill(self, index, value) -> None:
        """`value` into every element of the shard box `index`, kept as a value by the storage whatever the box."""
        shape, itemsize, value = self.placement.shape, self.dtype.itemsize, np.asarray(value, dtype=self.dtype.numpy)
        first, stop, contiguous = box_span(shape, index)
        if contiguous:
            self._allocation.storage.fill(first * itemsize, stop * itemsize, value)
        else:
            self._allocation.storage.fill_box(shape, index, first * itemsize, stop * itemsize, value)

    def _nearest_replica(self, cube: int):
        """The shards of the replica whose cube is nearest `cube` on the mesh."""
        placement = self.placement
        replica = self._ctx.machine.nearest_replica(placement, self.device.index, cube)
        return [shard for shard in placement.shards if shard.replica == replica]

    # ---- writes -------------------------------------------------------------------------
    @host_read
    def copy_(self, src: "Tensor | np.ndarray", non_blocking: bool = False) -> "Tensor":
        """Copy `src` into this tensor; a host read when this tensor is on the host and `src` is not.

        Host→device, device→host and device→device copies are each timed DMAs;
        `src` is broadcast to this tensor's shape and converted to its dtype.
        """
        autograd.check_in_place(self, "copy", (src,))
        copy_into(self, src, non_blocking=non_blocking)
        return self

    def fill_(self, value) -> "Tensor":
        """Every element set to `value`, as device work (an HBM fill) enqueued on the current stream."""
        autograd.check_in_place(self, "fill", (value,))
        fill_into(self, value)
        return self

    def zero_(self) -> "Tensor":
        return self.fill_(0)

    def clone(self) -> "Tensor":
        """A new contiguous tensor with (once the enqueued copy runs) the same values; the same placement
        when this tensor is its whole storage."""
        if self.device.is_host:
            return self._ctx_host_tensor(self._host_array.copy())
        policy = self.placement.policy if self._is_whole_storage() else None
        twin = device_tensor(self._ctx, self.shape, self.dtype, self.device.index, policy, f"{self.name}.clone")
        copy_into(twin, self, non_blocking=False)
        return autograd.record(twin, "clone", (self,), _identity_backward)

    # ---- autograd (autograd.py) ----------------------------------------------------------
    @property
    def is_leaf(self) -> bool:
        return self.grad_fn is None

    @property
    def data(self) -> "Tensor":
        """This tensor's values outside autograd: an alias of its storage that requires no grad (as torch's)."""
        return self.detach()

    @data.setter
    def data(self, other: "Tensor") -> None:
        """`x.data = y`: x now shows y's storage and layout, its autograd state kept (torch's set_data). What
        `param.grad.data /= n` does, the in-place op's result being assigned back."""
        if not isinstance(other, Tensor) or (other.dtype, other.device) != (self.dtype, self.device):
            raise TensorError(f"{self.name}.data = ...: expected a tensor of {self.dtype.name} on {self.device}, got "
                              f"{getattr(other, 'dtype', type(other).__name__)} on {getattr(other, 'device', '-')}")
        self._layout, self.shape, self._base = other._layout, other.shape, other if other._base is None else other._base
        self._allocation, self._host_storage = other._allocation, other._host_storage
        self._pending_writes = other._pending_writes

    def detach(self) -> "Tensor":
        """A view of the same storage with no autograd history."""
        return self._viewed(self._layout, "detach")

    def detach_(self) -> "Tensor":
        self.grad_fn, self.requires_grad = None, False
        return self

    def requires_grad_(self, requires_grad: bool = True) -> "Tensor":
        if self.grad_fn is not None and not requires_grad:
            raise TensorError(f"requires_grad_(False) on {self.name!r}, which is not a leaf; use detach()")
        if requires_grad and not self.dtype.is_differentiable:
            raise TensorError(f"only Tensors of floating point and complex dtype can require gradients; "
                              f"{self.name!r} is {self.dtype.name}")
        self.requires_grad = requires_grad
        return self

    def retain_grad(self) -> None:
        """Keep this non-leaf tensor's gradient in `.grad` after backward."""
        self._retains_grad = True

    def register_hook(self, hook):
        """`hook(grad)` when a backward has this tensor's whole gradient, before it flows on (or into `.grad`); a
        tensor it returns replaces the gradient. Returns a handle whose `remove()` takes the hook out."""
        if not self.requires_grad:
            raise TensorError("cannot register a hook on a tensor that doesn't require gradient")
        if "_grad_hooks" not in self.__dict__:
            self._grad_hooks = {}
        handle = autograd.RemovableHandle(self._grad_hooks)
        self._grad_hooks[handle.id] = hook
        return handle

    def backward(self, gradient: "Tensor | None" = None, retain_graph=None, create_graph: bool = False,
                 inputs=None) -> None:
        """Accumulate the gradient of this tensor into every leaf that requires grad; backward ops are device work."""
        if create_graph or inputs is not None:
            raise TensorError("backward: create_graph= and inputs= are not supported by kernbench")
        autograd.backward(self, gradient, retain_graph)


def _elements_of(storage: np.ndarray, dtype: DType) -> np.ndarray:
    """A host storage's bytes as whole elements of `dtype` (a view: a complex view of 5 floats holds 2 numbers)."""
    whole = storage.nbytes - storage.nbytes % dtype.itemsize
    return storage.view(np.uint8)[:whole].view(dtype.numpy)


def _identity_backward(grad):
    return (grad,)


def _gather_backward(base, key, grad):
    """Gradient of `base[key]`: the output gradient scattered into zeros, summed where indices repeat (as an
    embedding's backward sums the gradients of a repeated token id)."""
    zeros = base._new_like(base.shape, f"{base.name}.grad").fill_(0)
    targets = zeros._selected(key)
    if np.unique(targets).size == targets.size:
        copy_elements(zeros, targets, grad, None, non_blocking=True)  # a plain scatter: one DMA per cube
    else:
        index_add(zeros, targets, grad)
    return (zeros,)


def device_tensor(ctx, shape, dtype: DType, device_index: int, policy, name: str) -> Tensor:
    """Allocate an uninitialized tensor in `device_index`'s HBM, placed by `policy`, or by the topology's default
    rule (`sip.default_placement`) when it is None: the one place a tensor without a policy gets one."""
    topology = ctx.topology
    if policy is None:
        policy = default_policy(topology)
    placement = policy.place(tuple(shape), topology.cubes_per_sip, topology.pes_per_cube)
    nbytes = prod(shape) * dtype.itemsize
    allocation = ctx.machine.memory[device_index].allocate(name, nbytes, dtype.itemsize, placement)
    tensor = Tensor(ctx, shape, dtype, Device(DEVICE_TYPE, device_index), name, allocation=allocation)
    weakref.finalize(tensor, ctx.machine.memory[device_index].free, allocation)
    return tensor
