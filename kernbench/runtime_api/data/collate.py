"""`default_collate` and `default_convert`: a DataLoader's samples made into one batch, as PyTorch makes it.

Tensors are stacked along a new first dimension (`torch.stack`, on the
device they are on: a host tensor's batch is a host tensor, costing no
simulated time, until the bench moves it with `.to(device)`); numpy arrays
and numpy scalars become host tensors first; Python floats a float64 tensor,
ints an int64 one, bools a bool one; strings stay a list; a dict is
collated key by key, a named tuple field by field, and any other sequence
position by position (a tuple's batch is a list, as PyTorch's is).
"""

from __future__ import annotations

import collections.abc
import copy

import numpy as np

from kernbench.runtime_api.current_run import current_torch
from kernbench.runtime_api.errors import CollateError
from kernbench.runtime_api.tensor.core import Tensor

_UNCOLLATABLE = "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found {}"


def _is_numpy(value) -> bool:
    return type(value).__module__ == "numpy" and not isinstance(value, (np.str_, np.bytes_))


def _host_tensor(array: np.ndarray) -> Tensor:
    if array.dtype.kind in "OSUV":
        raise CollateError(_UNCOLLATABLE.format(array.dtype))
    return current_torch().from_numpy(np.ascontiguousarray(array))


def default_collate(batch):
    """One batch of a list of samples: tensors stacked (`torch.stack`: free for host tensors, device work for
    device ones), numbers and numpy arrays as host tensors, containers collated element-wise."""
    elem = batch[0]
    torch = current_torch()
    if isinstance(elem, Tensor):
        return torch.stack(list(batch), 0)
    if _is_numpy(elem):
        if isinstance(elem, np.ndarray):
            return default_collate([_host_tensor(sample) for sample in batch])
        return _host_tensor(np.asarray(batch))  # numpy scalars
    if isinstance(elem, float):
        return torch.tensor(batch, dtype=torch.float64, device="cpu")
    if isinstance(elem, int):  # bool too: torch.tensor gives its own dtype
        return torch.tensor(batch, device="cpu")
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, collections.abc.Mapping):
        collated = {key: default_collate([sample[key] for sample in batch]) for key in elem}
        return _rebuilt_mapping(elem, collated)
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # a named tuple
        return type(elem)(*(default_collate(list(samples)) for samples in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        size = len(elem)
        if any(len(sample) != size for sample in batch):
            raise CollateError("each element in list of batch should be of equal size")
        collated = [default_collate(list(samples)) for samples in zip(*batch)]
        return collated if isinstance(elem, (tuple, list)) else _rebuilt_sequence(elem, collated)
    raise CollateError(_UNCOLLATABLE.format(type(elem)))


def default_convert(data):
    """A sample as the DataLoader gives it without batching (`batch_size=None`): numpy arrays and numpy scalars as
    host tensors, containers converted element-wise, anything else unchanged."""
    if _is_numpy(data) and isinstance(data, (np.ndarray, np.generic)) and data.dtype.kind not in "OSUV":
        return current_torch().from_numpy(np.ascontiguousarray(data))
    if isinstance(data, collections.abc.Mapping):
        return _rebuilt_mapping(data, {key: default_convert(data[key]) for key in data})
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(value) for value in data))
    if isinstance(data, tuple):
        return [default_convert(value) for value in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        return _rebuilt_sequence(data, [default_convert(value) for value in data])
    return data


def _rebuilt_mapping(elem, values: dict):
    """`values` in `elem`'s mapping type (a copy updated, for a mutable one), else a dict, as PyTorch rebuilds it."""
    try:
        if isinstance(elem, collections.abc.MutableMapping):
            clone = copy.copy(elem)
            clone.update(values)
            return clone
        return type(elem)(values)
    except TypeError:
        return values


def _rebuilt_sequence(elem, values: list):
    """`values` in `elem`'s sequence type where it can be rebuilt, else a list."""
    try:
        if isinstance(elem, collections.abc.MutableSequence):
            clone = copy.copy(elem)
            clone[:] = values
            return clone
        return type(elem)(values)
    except TypeError:
        return values
