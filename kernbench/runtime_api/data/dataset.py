"""`torch.utils.data`'s datasets: map-style and iterable datasets, and the ways PyTorch combines and splits them.

A dataset is host code: indexing one reads what it holds (for a
`TensorDataset`, a view of each tensor, on whatever device that tensor is)
and costs no simulated time unless it calls device ops itself.
"""

from __future__ import annotations

import bisect
import itertools
import math
import warnings
from numbers import Real

from kernbench.runtime_api.data.sampler import rng_of
from kernbench.runtime_api.errors import DataLoaderError


class Dataset:
    """`torch.utils.data.Dataset`: a map from keys to samples; a subclass gives `__getitem__` (and `__len__`)."""

    def __getitem__(self, index):
        raise NotImplementedError("Subclasses of Dataset should implement __getitem__.")

    def __add__(self, other) -> "ConcatDataset":
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """`torch.utils.data.IterableDataset`: a stream of samples; a subclass gives `__iter__`."""

    def __iter__(self):
        raise NotImplementedError("Subclasses of IterableDataset should implement __iter__.")

    def __add__(self, other) -> "ChainDataset":
        return ChainDataset([self, other])


class TensorDataset(Dataset):
    """Sample i is the tuple of each tensor's row i; the tensors share their first dimension."""

    def __init__(self, *tensors):
        if any(tensor.size(0) != tensors[0].size(0) for tensor in tensors):
            raise DataLoaderError("Size mismatch between tensors")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(tensor[index] for tensor in self.tensors)

    def __len__(self) -> int:
        return self.tensors[0].size(0)


class StackDataset(Dataset):
    """Samples of several datasets of one length side by side: a tuple (positional) or a dict (keywords)."""

    def __init__(self, *args, **kwargs):
        if args and kwargs:
            raise DataLoaderError("Supported either ``tuple``- (via ``args``) or``dict``- (via ``kwargs``) like "
                                  "input/output, but both types are given.")
        datasets = args or tuple(kwargs.values())
        if not datasets or any(len(dataset) != len(datasets[0]) for dataset in datasets):
            raise DataLoaderError("Size mismatch between datasets")
        self.datasets = args or kwargs
        self._length = len(datasets[0])

    def __getitem__(self, index):
        if isinstance(self.datasets, dict):
            return {key: dataset[index] for key, dataset in self.datasets.items()}
        return tuple(dataset[index] for dataset in self.datasets)

    def __len__(self) -> int:
        return self._length


class ConcatDataset(Dataset):
    """Map-style datasets one after another: index i falls in the dataset whose cumulative size passes it."""

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise DataLoaderError("datasets should not be an empty iterable")
        if any(isinstance(dataset, IterableDataset) for dataset in self.datasets):
            raise DataLoaderError("ConcatDataset does not support IterableDataset")
        self.cumulative_sizes = list(itertools.accumulate(len(dataset) for dataset in self.datasets))

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, index):
        if index < 0:
            if -index > len(self):
                raise DataLoaderError("absolute value of index should not exceed dataset length")
            index += len(self)
        which = bisect.bisect_right(self.cumulative_sizes, index)
        if which == len(self.datasets):
            raise IndexError(f"index {index} is out of range for a ConcatDataset of length {len(self)}")
        start = self.cumulative_sizes[which - 1] if which else 0
        return self.datasets[which][index - start]


class ChainDataset(IterableDataset):
    """Iterable datasets one after another."""

    def __init__(self, datasets):
        self.datasets = datasets

    def __iter__(self):
        for dataset in self.datasets:
            yield from dataset

    def __len__(self) -> int:
        return sum(len(dataset) for dataset in self.datasets)


class Subset(Dataset):
    """The samples of `dataset` at `indices`, in that order."""

    def __init__(self, dataset, indices):
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, index):
        if isinstance(index, list):
            return self.dataset[[self.indices[i] for i in index]]
        return self.dataset[self.indices[index]]

    def __getitems__(self, indices: list) -> list:
        if callable(getattr(self.dataset, "__getitems__", None)):
            return self.dataset.__getitems__([self.indices[i] for i in indices])
        return [self.dataset[self.indices[i]] for i in indices]

    def __len__(self) -> int:
        return len(self.indices)


def random_split(dataset, lengths, generator=None) -> list[Subset]:
    """Split `dataset` into non-overlapping `Subset`s of `lengths` (counts, or fractions summing to 1) at a random
    permutation drawn from `generator=`, else the default host generator, as `torch.randperm` draws it."""
    lengths = list(lengths)
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        lengths = _split_of_fractions(len(dataset), lengths)
    if sum(lengths) != len(dataset):
        raise DataLoaderError("Sum of input lengths does not equal the length of the input dataset!")
    indices = rng_of(generator).permutation(len(dataset)).tolist()
    return [Subset(dataset, indices[end - length:end]) for end, length in zip(itertools.accumulate(lengths), lengths)]


def _split_of_fractions(total: int, fractions: list[Real]) -> list[int]:
    """Counts of `fractions` of `total`, each floored, the remainder given out one at a time from the first."""
    for i, fraction in enumerate(fractions):
        if not 0 <= fraction <= 1:
            raise DataLoaderError(f"Fraction at index {i} is not between 0 and 1")
    counts = [math.floor(total * fraction) for fraction in fractions]
    for i in range(total - sum(counts)):
        counts[i % len(counts)] += 1
    for i, count in enumerate(counts):
        if count == 0:
            warnings.warn(f"Length of split at index {i} is 0. This might result in an empty dataset.")
    return counts
