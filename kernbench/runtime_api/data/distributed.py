"""`torch.utils.data.distributed.DistributedSampler`: each rank's share of a dataset, as PyTorch's DDP scripts load.

Every rank draws the same permutation (a generator seeded by `seed + epoch`,
so `set_epoch` gives each epoch a new order on all ranks alike), pads it by
wrapping around to a multiple of the world size (or drops the tail with
`drop_last`) and takes every `num_replicas`-th index from its rank. The
world size and rank default to the calling rank's process group. Host work:
no simulated cost.
"""

from __future__ import annotations

import math

from kernbench.runtime_api.current_run import current_torch
from kernbench.runtime_api.data.sampler import Sampler
from kernbench.runtime_api.errors import DataLoaderError


class DistributedSampler(Sampler):
    """The indices of `dataset` this rank loads: a `num_replicas`-th of them, shuffled alike on every rank."""

    def __init__(self, dataset, num_replicas: int | None = None, rank: int | None = None, shuffle: bool = True,
                 seed: int = 0, drop_last: bool = False):
        dist = current_torch().distributed
        num_replicas = dist.get_world_size() if num_replicas is None else num_replicas
        rank = dist.get_rank() if rank is None else rank
        if rank >= num_replicas or rank < 0:
            raise DataLoaderError(f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]")
        self.dataset, self.num_replicas, self.rank = dataset, num_replicas, rank
        self.shuffle, self.seed, self.drop_last, self.epoch = shuffle, seed, drop_last, 0
        if drop_last and len(dataset) % num_replicas:
            self.num_samples = math.ceil((len(dataset) - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(len(dataset) / num_replicas)
        self.total_size = self.num_samples * num_replicas

    def __iter__(self):
        n = len(self.dataset)
        if self.shuffle:
            indices = current_torch().Generator().manual_seed(self.seed + self.epoch).numpy_rng.permutation(n).tolist()
        else:
            indices = list(range(n))
        if self.drop_last:
            indices = indices[:self.total_size]
        else:
            padding = self.total_size - n
            indices += (indices * math.ceil(padding / n))[:padding] if padding else []
        return iter(indices[self.rank:self.total_size:self.num_replicas])

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """The epoch whose order the next pass draws (the same on every rank that sets it)."""
        self.epoch = epoch
