"""`torch.utils.data.DataLoader`: batches of a dataset, on the host, as PyTorch's loader gives them.

Loading is host work and costs no simulated time: a batch of host tensors
stays on the host until the bench moves it with `.to(device)`, the timed
host-to-device copy. Workers run in-process: `num_workers`, `pin_memory`,
`persistent_workers`, `prefetch_factor`, `timeout`, `worker_init_fn` and
`multiprocessing_context` are checked as PyTorch checks them and then
loading is what `num_workers=0` does (`get_worker_info()` is None, so an
`IterableDataset` that shards itself by worker yields its whole stream
once). `pin_memory` has no effect: host memory is not modelled as pinned.
Each `iter(loader)` is a fresh pass (a new epoch's order) and, as PyTorch's,
first draws one base seed from `generator=` or the default host generator.
"""

from __future__ import annotations

import itertools

from kernbench.runtime_api.data.collate import default_collate, default_convert
from kernbench.runtime_api.data.dataset import IterableDataset
from kernbench.runtime_api.data.sampler import BatchSampler, RandomSampler, SequentialSampler, draw_seed
from kernbench.runtime_api.errors import DataLoaderError

# Set once a loader is made: PyTorch refuses to change them after.
_FIXED = ("batch_size", "batch_sampler", "sampler", "drop_last", "dataset", "persistent_workers")


def get_worker_info():
    """None: loading runs in the bench's own process, as in PyTorch's main process (`num_workers=0`)."""
    return None


class DataLoader:
    """Batches of `dataset` by `sampler` / `batch_sampler` (or `shuffle`), each made by `collate_fn`: host work of
    no simulated cost (a batch of host tensors stays on the host until `.to(device)`); workers run in-process."""

    def __init__(self, dataset, batch_size: int | None = 1, shuffle: bool | None = None, sampler=None,
                 batch_sampler=None, num_workers: int = 0, collate_fn=None, pin_memory: bool = False,
                 drop_last: bool = False, timeout: float = 0, worker_init_fn=None, multiprocessing_context=None,
                 generator=None, *, prefetch_factor: int | None = None, persistent_workers: bool = False,
                 pin_memory_device: str = "", in_order: bool = True):
        _check_workers(num_workers, timeout, prefetch_factor, persistent_workers)
        iterable = isinstance(dataset, IterableDataset)
        if iterable:
            for name, value in (("shuffle", shuffle), ("sampler", sampler), ("batch_sampler", batch_sampler)):
                if value not in (None, False):
                    raise DataLoaderError(f"DataLoader with IterableDataset: expected unspecified {name} option, "
                                          f"but got {name}={value}")
        shuffle = bool(shuffle)
        if sampler is not None and shuffle:
            raise DataLoaderError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise DataLoaderError("batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, "
                                      "and drop_last")
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise DataLoaderError("batch_size=None option disables auto-batching and is mutually exclusive with "
                                  "drop_last")
        if sampler is None:
            if iterable:
                sampler = itertools.repeat(None)  # one step of the stream per index, as PyTorch's constant sampler
            else:
                sampler = RandomSampler(dataset, generator=generator) if shuffle else SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.dataset, self.batch_size, self.drop_last = dataset, batch_size, drop_last
        self.sampler, self.batch_sampler, self.generator = sampler, batch_sampler, generator
        self.num_workers, self.pin_memory, self.timeout = num_workers, pin_memory, timeout
        self.worker_init_fn, self.multiprocessing_context = worker_init_fn, multiprocessing_context
        self.prefetch_factor, self.persistent_workers = prefetch_factor, persistent_workers
        self.pin_memory_device, self.in_order = pin_memory_device, in_order
        self.collate_fn = collate_fn or (default_collate if batch_sampler is not None else default_convert)
        self._initialized = True

    def __setattr__(self, name: str, value) -> None:
        if getattr(self, "_initialized", False) and name in _FIXED:
            raise DataLoaderError(f"{name} attribute should not be set after {type(self).__name__} is initialized")
        super().__setattr__(name, value)

    @property
    def _auto_collation(self) -> bool:
        return self.batch_sampler is not None

    def __iter__(self):
        """A fresh pass over the dataset: a new iterator of the sampler (a new shuffle) and of an iterable
        dataset's stream."""
        draw_seed(self.generator)  # PyTorch's base seed of the pass, drawn whether or not anything is random
        return _batches(self)

    def __len__(self) -> int:
        if isinstance(self.dataset, IterableDataset):
            length = len(self.dataset)
            if self.batch_size is None:
                return length
            return length // self.batch_size if self.drop_last else -(-length // self.batch_size)
        return len(self.batch_sampler if self._auto_collation else self.sampler)


def _batches(loader: DataLoader):
    """The batches of one pass: each index (or list of indices) of the loader's sampler, fetched and collated."""
    dataset, collate = loader.dataset, loader.collate_fn
    indices = loader.batch_sampler if loader._auto_collation else loader.sampler
    if isinstance(dataset, IterableDataset):
        stream = iter(dataset)
        for index in indices:
            if not loader._auto_collation:
                sample = next(stream, _END)
                if sample is _END:
                    return
                yield collate(sample)
                continue
            batch = list(itertools.islice(stream, len(index)))
            if not batch or loader.drop_last and len(batch) < len(index):
                return
            yield collate(batch)
        return
    getitems = getattr(dataset, "__getitems__", None)
    for index in indices:
        if not loader._auto_collation:
            yield collate(dataset[index])
        else:
            yield collate(getitems(index) if callable(getitems) else [dataset[i] for i in index])


_END = object()


def _check_workers(num_workers, timeout, prefetch_factor, persistent_workers) -> None:
    """PyTorch's checks of the worker options (workers then run in-process)."""
    if num_workers < 0:
        raise DataLoaderError("num_workers option should be non-negative; use num_workers=0 to disable "
                              "multiprocessing.")
    if timeout < 0:
        raise DataLoaderError("timeout option should be non-negative")
    if num_workers == 0 and prefetch_factor is not None:
        raise DataLoaderError("prefetch_factor option could only be specified in multiprocessing.let num_workers > 0 "
                              "to enable multiprocessing, otherwise set prefetch_factor to None.")
    if persistent_workers and num_workers == 0:
        raise DataLoaderError("persistent_workers option needs num_workers > 0")
