"""Tensor factories with torch's signatures, plus `dp=` (placement) and `name=`.

Device tensors are the default (the simulated device plays the role of
`torch.set_default_device("ahbm")`, and `torch.set_default_device` changes it
per rank); `device="cpu"` and `from_numpy` make host tensors. Values a device
produces itself (zeros, ones, full, arange, eye, random numbers) are written by an
HBM fill enqueued on the current stream; values that come from the host
(`tensor(data)`) cross the host link as a copy.
Random numbers come from `generator=` or the calling rank's default
generator (random.py), so a run's data is as repeatable as its timing.

Capacity comes first: a device tensor is allocated (and refused, if it does
not fit) before any host memory is spent on its values. A constant fill
stays a constant in the tensor's storage until it is written (adr/0013), and
in a timing-only run no values are made at all.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from kernbench.dtypes import DType, complex64, dtype_of_array, float32, int64, resolve_dtype
from kernbench.machine import Transfer, hbm
from kernbench.machine.storage import HostMemoryError
from kernbench.numerics import device_arithmetic
from kernbench.policy import DPPolicy, Interleaved
from kernbench.runtime_api.layout.copies import fill_into, slice_of
from kernbench.runtime_api.device import CPU
from kernbench.runtime_api.errors import TensorError
from kernbench.runtime_api.tensor.core import Tensor, device_tensor



class Factories:
    """The tensor-creating functions of the fake `torch` namespace, bound to one run."""

    def __init__(self, ctx):
        self._ctx = ctx

    def empty(self, *size, dtype=None, device=None, dp: DPPolicy | None = None, name: str | None = None) -> Tensor:
        return self._new(_shape(size), resolve_dtype(dtype), device, dp, name)

    def zeros(self, *size, dtype=None, device=None, dp=None, name=None) -> Tensor:
        return self.full(_shape(size), 0, dtype=resolve_dtype(dtype), device=device, dp=dp, name=name)

    def ones(self, *size, dtype=None, device=None, dp=None, name=None) -> Tensor:
        return self.full(_shape(size), 1, dtype=resolve_dtype(dtype), device=device, dp=dp, name=name)

    def full(self, size, fill_value, *, dtype=None, device=None, dp=None, name=None) -> Tensor:
        shape = _shape((size,))
        dtype = resolve_dtype(dtype, default=_default_for(fill_value))
        out = self._new(shape, dtype, device, dp, name)
        fill_into(out, np.asarray(fill_value, dtype=dtype.numpy))  # kept as a constant by the storage (adr/0013)
        return out

    def arange(self, start, end=None, step=1, *, dtype=None, device=None, dp=None, name=None) -> Tensor:
        if end is None:
            start, end = 0, start
        if step == 0:
            raise TensorError("arange: step must be nonzero")
        is_float = any(isinstance(x, (float, np.floating)) for x in (start, end, step))
        dtype = resolve_dtype(dtype, default=float32 if is_float else int64)
        count = max(0, math.ceil((end - start) / step)) if is_float else len(range(start, end, step))
        return self._generated((count,), dtype, device, dp, name,
                               lambda: np.arange(start, end, step)[:count].astype(dtype.numpy))

    def range(self, start=0, end=None, step=1, *, dtype=None, device=None, dp=None, name=None) -> Tensor:
        """PyTorch's deprecated `torch.range`: `start` to `end` inclusive by `step`, float32 by default (arange's
        fill)."""
        if end is None:
            start, end = 0, start
        if step == 0:
            raise TensorError("range: step must be nonzero")
        dtype = resolve_dtype(dtype, default=float32)
        count = max(0, math.floor((end - start) / step) + 1)
        return self._generated((count,), dtype, device, dp, name,
                               lambda: (start + step * np.arange(count)).astype(dtype.numpy))

    def linspace(self, start, end, steps: int, *, dtype=None, device=None, dp=None, name=None) -> Tensor:
        """`steps` values evenly spaced from `start` to `end` inclusive, written by an HBM fill as `arange`'s are."""
        if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 0:
            raise TensorError(f"linspace: number of steps must be non-negative, got {steps!r}")
        dtype = resolve_dtype(dtype, default=float32)
        return self._generated((int(steps),), dtype, device, dp, name,
                               lambda: np.linspace(start, end, int(steps)).astype(dtype.numpy))

    def eye(self, n, m=None, *, dtype=None, device=None, dp=None, name=None) -> Tensor:
        """The n x m identity (n x n by default), written by an HBM fill as `arange`'s values are."""
        m = n if m is None else m
        for what, count in (("n", n), ("m", m)):
            if isinstance(count, bool) or not isinstance(count, (int, np.integer)) or count < 0:
                raise TensorError(f"eye: {what} must be a non-negative integer, got {count!r}")
        dtype = resolve_dtype(dtype, default=float32)
        return self._generated((int(n), int(m)), dtype, device, dp, name,
                               lambda: np.eye(int(n), int(m), dtype=dtype.numpy))

    def randn(self, *size, dtype=None, device=None, dp=None, name=None, generator=None) -> Tensor:
        """Standard normal samples, drawn from `generator=` or the calling rank's default generator."""
        dtype, shape, rng = resolve_dtype(dtype), _shape(size), self.rng_for(generator, device)
        return self._generated(shape, dtype, device, dp, name, lambda: standard_normal(rng, shape, dtype))

    def rand(self, *size, dtype=None, device=None, dp=None, name=None, generator=None) -> Tensor:
        """Samples uniform in [0, 1), drawn from `generator=` or the calling rank's default generator."""
        dtype, shape, rng = resolve_dtype(dtype), _shape(size), self.rng_for(generator, device)
        return self._generated(shape, dtype, device, dp, name, lambda: rng.random(shape).astype(dtype.numpy))

    def tensor(self, data, *, dtype=None, device=None, dp=None, name=None) -> Tensor:
        typed = isinstance(data, (Tensor, np.ndarray, np.generic))
        values = np.asarray(data.numpy() if isinstance(data, Tensor) else data)
        # torch keeps an array's (or tensor's) dtype; numbers and lists get the default float / int64 / complex64.
        if typed:
            default = dtype_of_array(values)
        else:
            default = _LIST_DEFAULTS.get(values.dtype.kind) or dtype_of_array(values)
        dtype = resolve_dtype(dtype, default=default)
        out = self._new(values.shape, dtype, device, dp, name)
        with device_arithmetic():
            converted = values.astype(dtype.numpy)
        return out.copy_(converted, non_blocking=True)

    def from_numpy(self, array: np.ndarray, *, name: str | None = None) -> Tensor:
        """A host tensor holding `array` (shared, as torch.from_numpy shares memory)."""
        array = np.ascontiguousarray(array)
        return Tensor(self._ctx, array.shape, dtype_of_array(array), CPU, name or self._ctx.next_tensor_name("host"),
                      host_array=array)

    def empty_like(self, other: Tensor, *, dtype=None, device=None, dp=None, name=None) -> Tensor:
        return self.empty(other.shape, dtype=dtype or other.dtype, device=device or other.device,
                          dp=dp or (other.placement.policy if other.placement else None), name=name)

    def zeros_like(self, other: Tensor, *, dtype=None, device=None, dp=None, name=None) -> Tensor:
        return self.full_like(other, 0, dtype=dtype, device=device, dp=dp, name=name)

    def ones_like(self, other: Tensor, *, dtype=None, device=None, dp=None, name=None) -> Tensor:
        return self.full_like(other, 1, dtype=dtype, device=device, dp=dp, name=name)

    def full_like(self, other: Tensor, fill_value, *, dtype=None, device=None, dp=None, name=None) -> Tensor:
        return self.full(other.shape, fill_value, dtype=dtype or other.dtype, device=device or other.device,
                         dp=dp or (other.placement.policy if other.placement else None), name=name)

    # ---- shared machinery -------------------------------------------------------------
    def rng_for(self, generator, device):
        """What a random factory draws from: `generator`, else the rank's default generator of the device the
        tensor is made on (`device`, else the default device), as PyTorch draws CPU and device tensors apart."""
        ctx = self._ctx
        return ctx.rng_for(generator, ctx.parse_device(ctx.default_device() if device is None else device))

    def _new(self, shape, dtype: DType, device, dp, name) -> Tensor:
        ctx = self._ctx
        target = ctx.parse_device(ctx.default_device() if device is None else device)
        if target.is_host:
            if dp is not None:
                raise TensorError("dp= places a tensor on a device's cubes; it has no meaning for device='cpu'")
            name = name or ctx.next_tensor_name("host")
            return Tensor(ctx, shape, dtype, CPU, name,
                          host_array=_host_values(name, shape, dtype, lambda: np.empty(shape, dtype=dtype.numpy)))
        if dp is not None and not isinstance(dp, (DPPolicy, Interleaved)):
            raise TensorError(f"dp= expects a DPPolicy, got {dp!r}")
        return device_tensor(ctx, shape, dtype, target.index, dp, name or ctx.next_tensor_name())

    def _generated(self, shape, dtype: DType, device, dp, name, make_values) -> Tensor:
        """A tensor whose values the device writes itself: one HBM fill per shard, enqueued.

        The tensor is allocated first; `make_values()` (the whole array) runs
        only after, and not at all in a timing-only run.
        """
        out = self._new(shape, dtype, device, dp, name)
        ctx = self._ctx
        if out.device.is_host:
            out._host_array[...] = make_values()
            return out
        data = not ctx.timing_only
        values = _host_values(out.name, shape, dtype, make_values) if data else None
        sip = out.device.index
        if values is not None:
            values = values.reshape(out.placement.shape)  # the space the shards slice (flat when interleaved)
        fills = [Transfer(src=None, dst=hbm(sip, shard.cube), nbytes=shard.numel() * dtype.itemsize,
                          read=functools.partial(slice_of, values, shard.index),
                          write=functools.partial(out._device_write, shard.index))
                 for shard in out.placement.shards]
        handle = ctx.current_stream(sip).enqueue(
            f"fill {out.name}", lambda: ctx.machine.run_transfers(fills, label=f"fill {out.name}", data=data),
            spmd=("fill", out, fills))
        out._pending_writes.append(handle)
        return out


# The dtype torch gives Python numbers and lists, by the numpy kind they convert to.
_LIST_DEFAULTS = {"f": float32, "i": int64, "u": int64, "c": complex64}


def standard_normal(rng: np.random.Generator, shape: tuple[int, ...], dtype: DType) -> np.ndarray:
    """`randn`'s draws: N(0, 1), or for a complex dtype real and imaginary parts each N(0, 1/2), as torch's."""
    if not dtype.is_complex:
        return rng.standard_normal(shape).astype(dtype.numpy)
    parts = rng.standard_normal((*shape, 2)) * math.sqrt(0.5)
    return (parts[..., 0] + 1j * parts[..., 1]).astype(dtype.numpy)


def _shape(size: tuple) -> tuple[int, ...]:
    """torch accepts zeros(2, 3), zeros((2, 3)) and zeros([2, 3])."""
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    shape = tuple(size)
    if any(isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0 for n in shape):
        raise TensorError(f"a tensor size must be non-negative integers, got {shape}")
    return tuple(int(n) for n in shape)


def _host_values(name: str, shape, dtype: DType, make) -> np.ndarray:
    """`make()`, with a host that cannot hold the values said in one line instead of numpy's MemoryError."""
    try:
        return make()
    except (MemoryError, ValueError) as error:
        if isinstance(error, ValueError) and "too big" not in str(error):
            raise  # numpy's words for a size beyond any host; other ValueErrors are the caller's
        nbytes = math.prod(shape) * dtype.itemsize
        raise HostMemoryError(f"tensor {name!r}: the host cannot hold its values ({nbytes} bytes of {dtype.name}, "
                              f"shape {tuple(shape)}); run with --timing-only, which keeps no values") from None


def _default_for(value) -> DType:
    """torch.full's inference: an int fill gives int64, anything else the default float."""
    return int64 if isinstance(value, (int, np.integer)) and not isinstance(value, bool) else float32
