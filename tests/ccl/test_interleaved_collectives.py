"""ADR 0004 T19: collectives over tensors the h200x4 topology interleaves (no DPPolicy) give numpy's values."""

from __future__ import annotations

import numpy as np

from kernbench.session import Session


def test_adr0004_t19_collectives_over_interleaved_tensors_of_any_length_give_numpys_values():
    session = Session("h200x4")
    torch = session.torch
    world = session.ctx.topology.n_sips
    lengths = (1, 7, 1001, 3 * 4096 + 4)  # shorter than the PE count, and runs that straddle cubes
    got = {}

    def worker(rank):
        torch.ahbm.set_device(rank)
        dist = torch.distributed
        for n in lengths:
            x = torch.from_numpy(np.arange(n, dtype=np.float32) + rank).cuda()
            assert len(x.placement.shards) == min(n, session.ctx.topology.pes_per_sip)
            dist.all_reduce(x)
            got["all_reduce", n, rank] = x.numpy()
        gathered = torch.empty(world * 1000, device="cuda")
        dist.all_gather_into_tensor(gathered, torch.full((1000,), float(rank), device="cuda"))
        got["all_gather", rank] = gathered.numpy()
        scattered = torch.empty(1000, device="cuda")
        dist.reduce_scatter_tensor(scattered, torch.full((world * 1000,), float(rank + 1), device="cuda"))
        got["reduce_scatter", rank] = scattered.numpy()
        sent = torch.full((333,), float(rank), device="cuda")
        dist.broadcast(sent, 2)
        got["broadcast", rank] = sent.numpy()

    def bench(torch):
        torch.distributed.init_process_group(backend="ahbm")
        torch.multiprocessing.spawn(worker, nprocs=world)

    session.run(bench, torch)
    ranks = range(world)
    for n in lengths:
        expected = sum(np.arange(n, dtype=np.float32) + rank for rank in ranks)
        for rank in ranks:
            np.testing.assert_array_equal(got["all_reduce", n, rank], expected)
    for rank in ranks:
        np.testing.assert_array_equal(got["all_gather", rank], np.repeat(np.arange(world, dtype=np.float32), 1000))
        np.testing.assert_array_equal(got["reduce_scatter", rank], np.full(1000, sum(r + 1 for r in ranks)))
        np.testing.assert_array_equal(got["broadcast", rank], np.full(333, 2.0))
