"""ADR 0011: `broadcast_data` and `tensor_parallel.utils` as Megatron's tests use them, on 8 ranks.

Written here (not copied) to check what Megatron-LM's `test_data.py`
(`broadcast_data` at tp 2 × pp 4, eight (8, 8) tensors) and
`test_tensor_parallel_utils.py` (the last-dim split, the 1-D chunks and
their gather, the vocabulary ranges) check.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernbench.tp import ModelParallelError
from kernbench.tp import utils as tp_utils
from kernbench.tp.data import broadcast_data
from tests.tp.megatron_utils import Utils, on_every_rank


def test_adr0011_t120_broadcast_data_gives_every_rank_its_groups_first_ranks_batch():
    def received(torch, rank, world_size):
        Utils.initialize_model_parallel(2, 4)
        # Each rank's own values: only the first rank of each tensor-parallel group is read.
        data = {key: torch.ones((8, 8)).cuda() * (10 * rank + key) for key in range(8)}
        data[7] = torch.ones((2, 3, 4)).cuda() * (10 * rank + 7)
        out = broadcast_data([0, 1, 7], data, torch.float32)
        Utils.initialize_model_parallel(1, 8)  # every rank first of its group: each checks its own data
        with pytest.raises(ModelParallelError, match="0 has data type torch.float16 which is different than "
                                                     "torch.float32"):
            broadcast_data([0], {0: torch.ones(2, dtype=torch.float16).cuda()}, torch.float32)
        Utils.destroy_model_parallel()
        return {key: value.cpu().numpy() for key, value in out.items()}

    for rank, out in on_every_rank(received).items():
        source = rank - rank % 2
        assert out[0].shape == out[1].shape == (8, 8) and out[7].shape == (2, 3, 4)
        for key in (0, 1, 7):
            np.testing.assert_array_equal(out[key], np.full(out[key].shape, 10 * source + key, np.float32))


def test_adr0011_t121_the_splits_and_the_1d_gather_of_tensor_parallel_utils():
    def split(torch, rank, world_size):
        torch.manual_seed(2)
        x = torch.rand((3, 4)).cuda()
        halves = tp_utils.split_tensor_along_last_dim(x, 2)
        assert torch.equal(halves[0], x[:, 0:2]) and torch.equal(halves[1], x[:, 2:4])
        with pytest.raises(AssertionError, match="4 is not divisible by 3"):
            tp_utils.split_tensor_along_last_dim(x, 3)
        Utils.initialize_model_parallel(tensor_model_parallel_size=2, pipeline_model_parallel_size=4)
        part = tp_utils.split_tensor_into_1d_equal_chunks(x)
        copied = tp_utils.split_tensor_into_1d_equal_chunks(x, new_buffer=True)
        gathered = tp_utils.gather_split_1d_tensor(part)
        Utils.destroy_model_parallel()
        return x.cpu().numpy(), part.cpu().numpy(), copied.cpu().numpy(), gathered.cpu().numpy()

    for rank, (x, part, copied, gathered) in on_every_rank(split).items():
        half = x.reshape(-1)[6 * (rank % 2):6 * (rank % 2) + 6]
        np.testing.assert_array_equal(part, half)
        np.testing.assert_array_equal(copied, half)
        np.testing.assert_array_equal(gathered, x.reshape(-1))
    vocab = tp_utils.VocabUtility
    assert vocab.vocab_range_from_global_vocab_size(1024, 3, 4) == (768, 1024)
    assert vocab.vocab_range_from_per_partition_vocab_size(256, 1, 4) == (256, 512)
