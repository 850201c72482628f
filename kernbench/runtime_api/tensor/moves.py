"""Where a tensor goes: torch's `.to(...)` and `.cuda(...)`, as copies between the host and the devices.

`.to` returns the tensor itself when neither device nor dtype changes (and
`copy=False`), as torch does; otherwise a new contiguous tensor, made by the
same copies as `copy_` (adr/0005): host→device crosses the host link and
blocks unless `non_blocking=True`; device→host is a host read (it waits for
the writes in flight); device→device (another SIP, or another dtype) is
enqueued on the destination's current stream and returns at once, as a GPU
copy or cast kernel does — a host read of the result waits for it. A
device tensor keeps its placement across a move when it is its whole
storage; anything else lands in the default placement.
"""

from __future__ import annotations

import numpy as np

from kernbench.dtypes import DType, resolve_dtype
from kernbench.runtime_api.device import CPU, DEVICE_TYPE, Device, DeviceError
from kernbench.runtime_api.errors import TensorError
from kernbench.runtime_api.ops.promotion import is_tensor


def to_device(tensor, device=None, dtype=None, non_blocking=False, copy=False):
    """`tensor.to(...)` in torch's three forms: `to(device, dtype)`, `to(dtype)`, `to(other)` (positional or keyword).

    When the first argument is a dtype or a tensor, the positional slots
    after it are torch's `non_blocking, copy` (so `x.to(torch.half, True)`
    is non-blocking).
    """
    if _is_dtype(device) or is_tensor(device):
        if dtype is not None and not isinstance(dtype, bool):
            raise TensorError(f"to(): got a second dtype or device {dtype!r} after {device!r}; "
                              "write to(device, dtype) or to(dtype)")
        if isinstance(dtype, bool):  # to(dtype_or_tensor, non_blocking, copy) given positionally
            non_blocking, copy = dtype, non_blocking
        first = device
        device, dtype = (first.device, first.dtype) if is_tensor(first) else (None, first)
    target = tensor.device if device is None else tensor._ctx.parse_device(device)
    dtype = tensor.dtype if dtype is None else resolve_dtype(dtype)
    if target == tensor.device and dtype == tensor.dtype and not copy:
        return tensor
    if target == tensor.device and dtype != tensor.dtype and not copy:
        return tensor.to_dtype(dtype)  # a cast on the device: a device op, recorded for autograd
    return _moved(tensor, target, dtype, non_blocking)


def cuda_device(tensor, device=None, non_blocking=False):
    """`tensor.cuda(device=None)` (and `.ahbm()`): `to` the current device, or to `device` (an index or ahbm:N)."""
    target = tensor._ctx.parse_device(DEVICE_TYPE if device is None else device)
    if target.is_host:
        raise DeviceError(f"cuda(): {device!r} is not a device of the accelerator; use .cpu() or .to('cpu')")
    return to_device(tensor, target, non_blocking=non_blocking)


def _is_dtype(value) -> bool:
    return isinstance(value, (DType, np.dtype)) or (isinstance(value, type) and issubclass(value, np.generic))


def _moved(tensor, target: Device, dtype: DType, non_blocking: bool):
    """A new contiguous tensor on `target` with `dtype` holding `tensor`'s values (once its copy lands)."""
    name = f"{tensor.name}.to"
    if target.is_host:
        values = tensor.numpy() if tensor.device.is_host else tensor.cpu().numpy()
        values = values.astype(dtype.numpy, copy=True)
        return tensor._make(tensor._ctx, tensor.shape, dtype, CPU, name, host_array=values)
    whole = not tensor.device.is_host and tensor._is_whole_storage()
    policy = tensor.placement.policy if whole else None
    out = tensor._make(tensor._ctx, tensor.shape, dtype, target, name, policy=policy)
    return out.copy_(tensor, non_blocking=non_blocking or not tensor.device.is_host)
