"""ADR 0020: torch.utils.data — datasets, samplers, default_collate and the DataLoader behave as PyTorch's, on the
host: loading costs no simulated time and a batch stays on the host until `.to(device)`."""

from __future__ import annotations

import textwrap
from collections import Counter, namedtuple

import numpy as np
import pytest

from kernbench.cli import main
from kernbench.session import Session

Pair = namedtuple("Pair", "left right")


def _run(fn, session: Session | None = None):
    session = session or Session("single_sip")
    out = {}
    session.run(lambda torch: out.update(value=fn(torch)), session.torch)
    return out["value"]


def _rows(torch, n: int = 10):
    from torch.utils.data import TensorDataset
    return TensorDataset(torch.arange(2 * n, device="cpu").reshape(n, 2), torch.arange(n, device="cpu"))


def _epoch(loader) -> list[list[int]]:
    return [labels.numpy().tolist() for _, labels in loader]


def test_adr0020_t37_shuffling_repeats_under_manual_seed_and_each_epoch_is_a_new_order():
    """`shuffle=True` draws each epoch's permutation from a generator seeded by the default host generator: the
    same after the same `manual_seed`, a new one each epoch, every index once; `generator=` gives its own stream;
    `iter(loader)` draws from the default generator even without shuffling, as PyTorch's base seed does."""
    def bench(torch):
        from torch.utils.data import DataLoader
        loader = DataLoader(_rows(torch), batch_size=4, shuffle=True)
        torch.manual_seed(3)
        first = [_epoch(loader), _epoch(loader)]
        torch.manual_seed(3)
        again = [_epoch(loader), _epoch(loader)]
        seeded = [_epoch(DataLoader(_rows(torch), batch_size=4, shuffle=True,
                                    generator=torch.Generator().manual_seed(5))) for _ in range(2)]
        torch.manual_seed(3)
        before = torch.randn(2, device="cpu").numpy()
        torch.manual_seed(3)
        _epoch(DataLoader(_rows(torch), batch_size=4))
        after = torch.randn(2, device="cpu").numpy()
        return first, again, seeded, before, after

    first, again, seeded, before, after = _run(bench)
    assert first == again and first[0] != first[1]
    for epoch in first:
        assert [len(batch) for batch in epoch] == [4, 4, 2]
        assert sorted(sum(epoch, [])) == list(range(10))
    assert seeded[0] == seeded[1] and seeded[0] != first[0]
    assert not np.array_equal(before, after)


def test_adr0020_t38_batches_are_host_tensors_made_at_no_simulated_cost_until_moved():
    """A pass over a DataLoader of host tensors adds no simulated time and gives host tensors; `.to("cuda")` is
    the timed copy; `len(loader)` counts batches with and without `drop_last`."""
    session = Session("single_sip")

    def bench(torch):
        from torch.utils.data import DataLoader
        dataset = _rows(torch, 9)
        start = session.engine.now
        batches = list(DataLoader(dataset, batch_size=4, shuffle=True, num_workers=2, pin_memory=True,
                                  persistent_workers=True))
        loading = session.engine.now - start
        moved = batches[0][0].to("cuda")
        torch.cuda.synchronize()
        return (loading, session.engine.now - start, [b.device.type for b in batches[0]], moved.device.type,
                len(DataLoader(dataset, batch_size=4)), len(DataLoader(dataset, batch_size=4, drop_last=True)),
                _epoch(DataLoader(dataset, batch_size=4, drop_last=True)))

    loading, with_copy, devices, moved, length, dropped_length, dropped = _run(bench, session)
    assert loading == 0 and with_copy > 0
    assert devices == ["cpu", "cpu"] and moved == "ahbm"
    assert (length, dropped_length) == (3, 2)
    assert dropped == [[0, 1, 2, 3], [4, 5, 6, 7]]


def test_adr0020_t39_default_collate_batches_dicts_tuples_numpy_and_numbers_as_pytorch():
    """Dicts key by key, tuples as lists, named tuples as themselves, numpy arrays and scalars as host tensors of
    their dtype, floats as float64, ints as int64, strings as lists; `batch_size=None` converts without
    batching; a custom `collate_fn` gets the list of samples."""
    samples = [{"x": np.full(3, i, np.float32), "y": (i, float(i)), "name": f"s{i}", "p": Pair(np.int16(i), True)}
               for i in range(5)]

    def bench(torch):
        from torch.utils.data import DataLoader
        from torch.utils.data.dataloader import default_collate
        batch = next(iter(DataLoader(samples, batch_size=2)))
        unbatched = next(iter(DataLoader(samples, batch_size=None)))
        custom = next(iter(DataLoader(samples, batch_size=3, collate_fn=lambda rows: [row["name"] for row in rows])))
        stacked = default_collate([torch.ones(2, 2, device="cpu"), torch.zeros(2, 2, device="cpu")])
        return {"x": (batch["x"].dtype, batch["x"].device.type, batch["x"].numpy()),
                "y": [(type(batch["y"]).__name__, [(t.dtype, t.numpy().tolist()) for t in batch["y"]])],
                "name": batch["name"], "p": (type(batch["p"]), batch["p"].left.dtype, batch["p"].right.dtype),
                "unbatched": (unbatched["x"].device.type, unbatched["x"].dtype, unbatched["y"]),
                "custom": custom, "stacked": (stacked.shape, stacked.numpy())}

    out = _run(bench)
    dtype, device, x = out["x"]
    assert str(dtype) == "torch.float32" and device == "cpu"
    np.testing.assert_array_equal(x, [[0, 0, 0], [1, 1, 1]])
    (kind, parts), = out["y"]
    assert kind == "list" and [(str(d), v) for d, v in parts] == [("torch.int64", [0, 1]), ("torch.float64", [0, 1])]
    assert out["name"] == ["s0", "s1"]
    assert out["p"][0] is Pair and (str(out["p"][1]), str(out["p"][2])) == ("torch.int16", "torch.bool")
    assert out["unbatched"][:2] == ("cpu", out["x"][0]) and out["unbatched"][2] == [0, 0.0]
    assert out["custom"] == ["s0", "s1", "s2"]
    assert out["stacked"][0] == (2, 2, 2) and out["stacked"][1][0].sum() == 4


def test_adr0020_t40_samplers_splits_and_combined_datasets_as_pytorchs():
    """SequentialSampler's order, RandomSampler with replacement and num_samples, SubsetRandomSampler's indices,
    BatchSampler with and without drop_last, a batch_sampler given to the loader, random_split by counts and
    fractions (disjoint, seeded), ConcatDataset / Subset indexing, and an IterableDataset batched to its end."""
    def bench(torch):
        from torch.utils.data import (BatchSampler, ConcatDataset, DataLoader, IterableDataset, RandomSampler,
                                      SequentialSampler, SubsetRandomSampler, random_split)
        from torch.utils.data.dataset import Subset
        from torch.utils.data.sampler import WeightedRandomSampler

        class Stream(IterableDataset):
            def __iter__(self):
                return iter(range(7))

        data = list(range(10, 20))
        torch.manual_seed(0)
        drawn = list(RandomSampler(data, replacement=True, num_samples=40))
        fewer = list(RandomSampler(data, num_samples=4))
        passes = list(RandomSampler(data, num_samples=40))
        subset = list(SubsetRandomSampler([3, 5, 7], generator=torch.Generator().manual_seed(1)))
        weighted = list(WeightedRandomSampler([0.0, 1.0, 0.0, 1.0], 20))
        splits = [list(s) for s in random_split(data, [3, 7], generator=torch.Generator().manual_seed(2))]
        same = [list(s) for s in random_split(data, [3, 7], generator=torch.Generator().manual_seed(2))]
        fractions = [len(s) for s in random_split(range(11), [0.5, 0.3, 0.2])]
        return (list(SequentialSampler(data)), drawn, fewer, passes, subset, weighted,
                list(BatchSampler(range(5), 2, False)), list(BatchSampler(range(5), 2, True)),
                [b.tolist() for b in DataLoader(data, batch_sampler=BatchSampler(range(4), 3, False))],
                splits, same, fractions, ConcatDataset([data, [0, 1]])[10], ConcatDataset([data, [0, 1]])[-1],
                Subset(data, [4, 2])[1], [b.tolist() for b in DataLoader(Stream(), batch_size=3)],
                [b.tolist() for b in DataLoader(Stream(), batch_size=3, drop_last=True)])

    (sequential, drawn, fewer, passes, subset, weighted, batches, dropped, by_sampler, splits, same, fractions, concat,
     concat_last, picked, stream, stream_dropped) = _run(bench)
    assert sequential == list(range(10))
    assert len(drawn) == 40 and set(drawn) <= set(range(10)) and sorted(Counter(drawn).values()) != [4] * 10
    assert len(fewer) == 4 and len(set(fewer)) == 4 and sorted(Counter(passes).values()) == [4] * 10
    assert sorted(subset) == [3, 5, 7]
    assert set(weighted) == {1, 3}
    assert batches == [[0, 1], [2, 3], [4]] and dropped == [[0, 1], [2, 3]]
    assert by_sampler == [[10, 11, 12], [13]]
    assert splits == same and sorted(splits[0] + splits[1]) == list(range(10, 20)) and len(splits[0]) == 3
    assert fractions == [6, 3, 2]
    assert (concat, concat_last, picked) == (0, 1, 12)
    assert stream == [[0, 1, 2], [3, 4, 5], [6]] and stream_dropped == [[0, 1, 2], [3, 4, 5]]


@pytest.mark.parametrize("call, message", [
    ("DataLoader(data, batch_size=2, batch_sampler=BatchSampler(range(4), 2, False))",
     "batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and drop_last"),
    ("DataLoader(data, shuffle=True, sampler=range(4))", "sampler option is mutually exclusive with shuffle"),
    ("DataLoader(data, batch_size=0)", "batch_size should be a positive integer value, but got batch_size=0"),
    ("DataLoader(data, num_workers=-1)", "num_workers option should be non-negative; use num_workers=0 to disable "
                                         "multiprocessing."),
    ("TensorDataset(torch.zeros(4, device='cpu'))[4]", "index 4 is out of bounds for dimension 0 with size 4"),
    ("TensorDataset(torch.zeros(4, device='cpu'), torch.zeros(3, device='cpu'))", "Size mismatch between tensors"),
    ("random_split(data, [1, 2])", "Sum of input lengths does not equal the length of the input dataset!"),
    ("next(iter(DataLoader([object()], batch_size=1)))",
     "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found <class 'object'>"),
])
def test_adr0020_t41_bad_loader_input_is_one_line_in_pytorchs_words(tmp_path, capsys, call, message):
    """Options PyTorch refuses, an index out of a TensorDataset, a split of the wrong total, an uncollatable
    sample: `kernbench run` prints PyTorch's message on one line and exits 2."""
    bench = tmp_path / "bench.py"
    bench.write_text(textwrap.dedent(f"""
        import torch
        from torch.utils.data import BatchSampler, DataLoader, TensorDataset, random_split

        def run(torch):
            data = list(range(4))
            {call}
    """))
    assert main(["run", str(bench), "--topology", "single_sip"]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_adr0020_t42_distributed_sampler_gives_each_rank_its_share_of_one_order_per_epoch():
    """Under `init_process_group`, each rank's DistributedSampler (world size and rank from the group) takes every
    world-size-th index of one permutation all ranks draw alike: together the ranks cover the dataset, padded by
    wrapping to a multiple of the world size, or cut with `drop_last`; `set_epoch` gives a new order; a rank
    outside the world is PyTorch's message."""
    session = Session("default")
    torch, world, results = session.torch, session.ctx.topology.n_sips, {}

    def rank_main(rank):
        from torch.utils.data import DataLoader, DistributedSampler
        torch.ahbm.set_device(rank)
        torch.distributed.init_process_group("nccl")
        sampler = DistributedSampler(list(range(10)), seed=3)
        first = [batch.tolist() for batch in DataLoader(list(range(10)), batch_size=2, sampler=sampler)]
        again = list(sampler)
        sampler.set_epoch(1)
        results[rank] = (first, again, list(sampler), list(DistributedSampler(range(10), drop_last=True)),
                         list(DistributedSampler(range(10), shuffle=False)), len(sampler))
        torch.distributed.destroy_process_group()

    session.run(lambda: torch.multiprocessing.spawn(rank_main, nprocs=world))
    assert world == 4
    first = [sum(results[rank][0], []) for rank in range(world)]
    order = [first[i % world][i // world] for i in range(12)]  # the padded permutation, rank by rank
    assert sorted(order[:10]) == list(range(10)) and order[10:] == order[:2] and order[:10] != list(range(10))
    assert all(results[rank][1] == first[rank] for rank in range(world))
    assert [results[rank][2] for rank in range(world)] != [results[rank][1] for rank in range(world)]
    dropped = sum((results[rank][3] for rank in range(world)), [])
    assert len(dropped) == 8 and len(set(dropped)) == 8
    assert [results[rank][4] for rank in range(world)] == [[0, 4, 8], [1, 5, 9], [2, 6, 0], [3, 7, 1]]
    assert all(results[rank][5] == 3 for rank in range(world))

    def outside(torch):
        from torch.utils.data.distributed import DistributedSampler
        DistributedSampler(range(4), num_replicas=2, rank=2)

    with pytest.raises(ValueError, match=r"^Invalid rank 2, rank should be in the interval \[0, 1\]$"):
        _run(outside)
