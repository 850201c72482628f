"""`torch.utils.data`'s samplers: which dataset indices a DataLoader reads, and in what order, as PyTorch draws them.

A sampler is host code: it yields Python ints and costs no simulated time.
Its random draws come from the run's generators (namespace/random.py), in
PyTorch's order: a `RandomSampler` without `generator=` draws one seed from
the calling rank's default host generator when its iteration starts and
shuffles with a fresh `torch.Generator` seeded by it, so `torch.manual_seed`
makes every epoch's order repeat; the numbers are kernbench's (PCG64), not
PyTorch's.
"""

from __future__ import annotations

from numbers import Integral

import numpy as np

from kernbench.runtime_api.current_run import current_torch
from kernbench.runtime_api.errors import DataLoaderError

_SEED_BOUND = 1 << 63  # torch.empty((), dtype=torch.int64).random_() draws in [0, 2**63)
_CHUNK = 32  # RandomSampler draws indices with replacement 32 at a time, as PyTorch's does


def default_rng() -> np.random.Generator:
    """The numpy stream of the calling rank's default host generator (what `torch.randperm` draws from)."""
    return current_torch()._host_generator().numpy_rng


def rng_of(generator) -> np.random.Generator:
    """The stream of `generator=` (a `torch.Generator`), or of the default host generator when it is None."""
    if generator is None:
        return default_rng()
    if not hasattr(generator, "numpy_rng"):
        raise DataLoaderError(f"generator= expects a torch.Generator, got {generator!r}")
    return generator.numpy_rng


def draw_seed(generator=None) -> int:
    """One int64 seed from `generator` (or the default host generator): PyTorch's `random_()` of an empty int64."""
    return int(rng_of(generator).integers(0, _SEED_BOUND))


def _positive_int(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral) or value <= 0:
        raise DataLoaderError(f"{name} should be a positive integer value, but got {name}={value}")
    return int(value)


def _boolean(name: str, value) -> bool:
    if not isinstance(value, bool):
        raise DataLoaderError(f"{name} should be a boolean value, but got {name}={value}")
    return value


class Sampler:
    """`torch.utils.data.Sampler`: the base of samplers; a subclass gives `__iter__` (and `__len__` if sized)."""

    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError


class SequentialSampler(Sampler):
    """Indices 0 .. len(data_source)-1 in order."""

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


class RandomSampler(Sampler):
    """Indices in random order: a permutation per pass over the data without replacement, `num_samples` draws
    with it; from `generator=`, or a generator seeded from the default host generator at each iteration."""

    def __init__(self, data_source, replacement: bool = False, num_samples: int | None = None, generator=None):
        self.data_source = data_source
        self.replacement = _boolean("replacement", replacement)
        self._num_samples = num_samples
        self.generator = generator
        _positive_int("num_samples", self.num_samples)

    @property
    def num_samples(self) -> int:
        """`num_samples=`, or the dataset's length (read at each use, as the dataset may change size)."""
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        n, total = len(self.data_source), self.num_samples
        if self.generator is None:
            rng = current_torch().Generator().manual_seed(draw_seed()).numpy_rng
        else:
            rng = rng_of(self.generator)
        if self.replacement:
            for _ in range(total // _CHUNK):
                yield from rng.integers(0, n, size=_CHUNK).tolist()
            yield from rng.integers(0, n, size=total % _CHUNK).tolist()
        else:
            for _ in range(total // n):
                yield from rng.permutation(n).tolist()
            yield from rng.permutation(n).tolist()[:total % n]

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices in a random order, drawn from `generator=` or the default host generator itself."""

    def __init__(self, indices, generator=None):
        self.indices = indices
        self.generator = generator

    def __iter__(self):
        for i in rng_of(self.generator).permutation(len(self.indices)).tolist():
            yield self.indices[i]

    def __len__(self) -> int:
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """`num_samples` indices drawn with probabilities proportional to `weights` (`torch.multinomial`'s draw)."""

    def __init__(self, weights, num_samples: int, replacement: bool = True, generator=None):
        self.num_samples = _positive_int("num_samples", num_samples)
        self.replacement = _boolean("replacement", replacement)
        self.weights = np.asarray(weights.tolist() if hasattr(weights, "tolist") else weights, dtype=np.float64)
        if self.weights.ndim != 1:
            raise DataLoaderError(f"weights should be a 1d sequence but given weights have shape "
                                  f"{tuple(self.weights.shape)}")
        if not replacement and num_samples > len(self.weights):
            raise DataLoaderError("cannot sample n_sample > prob_dist.size(-1) samples without replacement")
        self.generator = generator

    def __iter__(self):
        p = self.weights / self.weights.sum()
        yield from rng_of(self.generator).choice(len(p), size=self.num_samples, replace=self.replacement,
                                                 p=p).tolist()

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler):
    """Lists of `batch_size` indices from `sampler`, the last one shorter unless `drop_last` drops it."""

    def __init__(self, sampler, batch_size: int, drop_last: bool):
        self.sampler = sampler
        self.batch_size = _positive_int("batch_size", batch_size)
        self.drop_last = _boolean("drop_last", drop_last)

    def __iter__(self):
        batch = []
        for index in self.sampler:
            batch.append(index)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self) -> int:
        if self.drop_last:
            return len(self.sampler) // self.batch_size
        return -(-len(self.sampler) // self.batch_size)
