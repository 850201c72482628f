"""ADR 0020: `torch.nn.parallel.DistributedDataParallel` — replicas start equal and step with averaged gradients."""

from __future__ import annotations

import numpy as np

from kernbench.numerics import assert_close
from kernbench.session import Session

WORLD = 4


def _toy_grads(w1, b1, w2, b2, x, labels):
    """Gradients of MSE(net2(relu(net1(x))), labels) in numpy."""
    h = x @ w1.T + b1
    a = np.maximum(h, 0)
    out = a @ w2.T + b2
    g_out = 2 * (out - labels) / out.size
    g_a = g_out @ w2
    g_h = g_a * (h > 0)
    return g_h.T @ x, g_h.sum(0), g_out.T @ a, g_out.sum(0)


def test_adr0020_t17_ddp_replicas_start_from_rank_0_and_average_their_gradients_in_backward():
    session = Session("default")
    seen = {}

    def worker(rank, torch):
        nn = torch.nn
        torch.distributed.init_process_group("nccl", rank=rank, world_size=WORLD)
        torch.ahbm.set_device(rank)
        torch.manual_seed(rank)  # each replica draws other weights: DDP's broadcast makes them rank 0's

        class ToyModel(nn.Module):
            def __init__(self):
                super().__init__()
                self.net1, self.relu, self.net2 = nn.Linear(10, 10), nn.ReLU(), nn.Linear(10, 5)

            def forward(self, x):
                return self.net2(self.relu(self.net1(x)))

        model = ToyModel().to(rank)
        ddp = nn.parallel.DistributedDataParallel(model, device_ids=[rank])
        start = [p.numpy().copy() for p in model.parameters()]
        names = [n for n, _ in ddp.named_parameters()][:2]
        x, labels = torch.randn(6, 10), torch.randn(6, 5)
        nn.MSELoss()(ddp(x), labels).backward()
        with ddp.no_sync():
            local = nn.Parameter(torch.ones(2))
            ddp.module.register_parameter("extra", local)
            (ddp(x).sum() + local.sum()).backward()
        seen[rank] = dict(start=start, x=x.numpy(), labels=labels.numpy(),
                          grads=[p.grad.numpy() for p in (model.net1.weight, model.net1.bias, model.net2.weight,
                                                          model.net2.bias)],
                          names=names, extra=local.grad.numpy())

    def bench(torch):
        torch.multiprocessing.spawn(worker, args=(torch,), nprocs=WORLD)

    session.run(bench, session.torch)
    start = seen[0]["start"]
    per_rank = [_toy_grads(*[a.astype(np.float64) for a in start], seen[r]["x"], seen[r]["labels"])
                for r in range(WORLD)]
    averaged = [np.mean([g[i] for g in per_rank], axis=0) for i in range(4)]
    for rank in range(WORLD):
        assert all(np.array_equal(a, b) for a, b in zip(seen[rank]["start"], start))
        assert seen[rank]["names"] == ["module.net1.weight", "module.net1.bias"]
        assert np.array_equal(seen[rank]["extra"], np.ones(2))
        local = _local_sum_grads(start, seen[rank]["x"])
        for got, avg, extra in zip(seen[rank]["grads"], averaged, local):
            assert_close(got, avg + extra, "f32")  # the no_sync pass adds its local gradient, not averaged


def _local_sum_grads(params, x):
    """Gradients of sum(net2(relu(net1(x)))) with the rank's own input (no averaging)."""
    w1, b1, w2, _ = (p.astype(np.float64) for p in params)
    h = x @ w1.T + b1
    a = np.maximum(h, 0)
    g_out = np.ones((x.shape[0], w2.shape[0]))
    g_h = (g_out @ w2) * (h > 0)
    return g_h.T @ x, g_h.sum(0), g_out.T @ a, g_out.sum(0)
