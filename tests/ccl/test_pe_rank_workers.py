"""ADR 0012 "Above it": above the SIP count, spawned workers share the ranks out, a worker per SIP, each driving
world_size/nprocs consecutive PE ranks of its own SIP.

Worker w's tensors hold the chunks of ranks w·k .. w·k+k−1 (k = world/nprocs), chunk j on its own PE
(`pe_rank_policy()`), and every collective meets the other workers' calls: values are numpy's across SIPs.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from kernbench.ccl.errors import CollectiveError
from kernbench.cli.bench_loader import load_bench
from kernbench.cli.bench_options import BenchUsageError
from kernbench.session import Session
from kernbench.sim_engine import Deadlock
from tests.ccl.test_distributed import ccl, restore_current_ccl  # noqa: F401 (autouse fixture)
from tests.spawned import run_ranks

SIPS, PER_SIP, WIDTH = 4, 2, 6
WORLD = SIPS * PER_SIP


def rank_values(rank: int, width: int = WIDTH) -> np.ndarray:
    return np.arange(width, dtype=np.float32) + 100 * rank


def chunks_of(first: int, width: int = WIDTH) -> np.ndarray:
    """A worker's (1, k·width) tensor: chunk j is rank first + j's values."""
    return np.concatenate([rank_values(first + j, width) for j in range(PER_SIP)]).reshape(1, PER_SIP * width)


def spawn_workers(fn, algorithm: str = "ring") -> tuple[dict, Session]:
    """`fn(torch, dist, first_rank)` on each of SIPS spawned workers of a WORLD-rank world; its results by worker."""
    session = Session("default", ccl=ccl(algorithm, world_size=WORLD))
    torch, results = session.torch, {}

    def worker(rank):
        torch.ahbm.set_device(rank)
        dist = torch.distributed
        dist.init_process_group()
        results[rank] = fn(torch, dist, dist.get_rank())

    run_ranks(session, lambda torch: torch.multiprocessing.spawn(worker, nprocs=SIPS))
    return results, session


def test_adr0012_t88_workers_drive_their_sips_pe_ranks_and_every_collective_matches_numpy():
    everyone = np.stack([rank_values(r) for r in range(WORLD)])

    def fn(torch, dist, first):
        policy = dist.pe_rank_policy()
        mine = lambda width=WIDTH: torch.tensor(chunks_of(first, width), dp=policy)  # noqa: E731
        empty = lambda width: torch.empty((1, PER_SIP * width), dtype="f32", dp=policy)  # noqa: E731
        out = {"rank": (first, dist.get_world_size())}
        x = mine()
        dist.all_reduce(x)
        out["all_reduce"] = x.numpy()
        x = mine()
        dist.broadcast(x, src=5)
        out["broadcast"] = x.numpy()
        x = mine()
        dist.reduce(x, dst=3)
        out["reduce"] = x.numpy()
        gathered = empty(WORLD * WIDTH)
        dist.all_gather_into_tensor(gathered, mine())
        out["all_gather_into_tensor"] = gathered.numpy()
        scattered = empty(WIDTH)
        dist.reduce_scatter_tensor(scattered, mine(WORLD * WIDTH))
        out["reduce_scatter_tensor"] = scattered.numpy()
        listed = [empty(WIDTH) for _ in range(WORLD)]
        dist.all_gather(listed, mine())
        out["all_gather"] = [t.numpy() for t in listed]
        received = empty(WIDTH)
        source = [torch.tensor(np.full((1, PER_SIP * WIDTH), 1000.0 + q, dtype=np.float32), dp=policy)
                  for q in range(WORLD)] if first <= 6 < first + PER_SIP else None
        dist.scatter(received, source, src=6)
        out["scatter"] = received.numpy()
        collected = [empty(WIDTH) for _ in range(WORLD)] if first <= 1 < first + PER_SIP else None
        dist.gather(mine(), collected, dst=1)
        out["gather"] = [t.numpy() for t in collected] if collected else None
        traded = empty(WORLD)
        dist.all_to_all_single(traded, mine(WORLD))
        out["all_to_all_single"] = traded.numpy()
        across = dist.new_group([2, 3, 4, 5])  # workers 1 and 2
        if first in (2, 4):
            x = mine()
            dist.all_reduce(x, group=across, async_op=True).wait()
            out["across"], out["group_rank"] = x.numpy(), across.rank()
        inside = dist.new_group([6, 7])  # worker 3 alone: no other worker to meet
        if first == 6:
            x = torch.tensor(chunks_of(first), dp=dist.pe_rank_policy(inside))
            dist.all_reduce(x, group=inside)
            out["inside"] = x.numpy()
        dist.barrier()
        return out

    results, session = spawn_workers(fn)
    for worker, out in results.items():
        first = worker * PER_SIP
        own = slice(first, first + PER_SIP)
        assert out["rank"] == (first, WORLD)

        def per_rank(values, width=WIDTH):
            return np.asarray(values).reshape(PER_SIP, width)

        assert np.all(per_rank(out["all_reduce"]) == everyone.sum(axis=0))
        assert np.all(per_rank(out["broadcast"]) == rank_values(5))
        if first <= 3 < first + PER_SIP:
            assert np.all(per_rank(out["reduce"])[3 - first] == everyone.sum(axis=0))
        assert np.all(per_rank(out["reduce"])[[j for j in range(PER_SIP) if first + j != 3]]
                      == everyone[own][[j for j in range(PER_SIP) if first + j != 3]])  # non-roots untouched
        assert np.all(per_rank(out["all_gather_into_tensor"], WORLD * WIDTH) == everyone.reshape(-1))
        wide = np.stack([rank_values(r, WORLD * WIDTH) for r in range(WORLD)]).sum(axis=0).reshape(WORLD, WIDTH)
        assert np.all(per_rank(out["reduce_scatter_tensor"]) == wide[own])
        assert all(np.all(per_rank(out["all_gather"][q]) == rank_values(q)) for q in range(WORLD))
        assert np.all(per_rank(out["scatter"]) == 1000.0 + np.arange(first, first + PER_SIP)[:, None])
        if out["gather"] is not None:
            assert all(np.all(per_rank(out["gather"][q])[1 - first] == rank_values(q)) for q in range(WORLD))
        sent = np.stack([rank_values(r, WORLD) for r in range(WORLD)])  # rank r sends element k to rank k
        assert np.all(per_rank(out["all_to_all_single"], WORLD) == sent.T[own])
        if "across" in out:
            assert np.all(per_rank(out["across"]) == everyone[2:6].sum(axis=0))
            assert out["group_rank"] == first - 2
        if "inside" in out:
            assert np.all(per_rank(out["inside"]) == everyone[6:8].sum(axis=0))
    rows = {row["label"]: row for row in session.ctx.collectives}
    assert rows["all_reduce#0"]["ranks"] == list(range(WORLD))
    assert rows["all_reduce#0[group[2, 3, 4, 5]]"]["ranks"] == [2, 3, 4, 5]
    assert rows["barrier#9"]["collective"] == "barrier"


def test_adr0012_t89_a_workers_misuse_names_its_ranks():
    def elsewhere(torch, dist, first):
        dist.all_reduce(torch.ones((1, PER_SIP * 4), device="ahbm:0", dp=dist.pe_rank_policy()))

    with pytest.raises(CollectiveError) as error:
        spawn_workers(elsewhere)
    assert re.fullmatch(r"all_reduce on ranks 2\.\.3: tensor '\w+' is on ahbm:0, but with world_size 8 over 4 workers "
                        r"this worker's ranks are PEs of ahbm:1; call torch\.ahbm\.set_device\(rank\) in the worker",
                        str(error.value))

    def disagree(torch, dist, first):
        dist.all_reduce(torch.ones((1, PER_SIP * (5 if first == 4 else 4)), dp=dist.pe_rank_policy()))

    with pytest.raises(CollectiveError, match=r"all_reduce#0: ranks disagree: rank 0 called all_reduce\(4 f32 "
                                              r"elements, op=sum\), rank 4 called all_reduce\(5 f32 elements, "
                                              r"op=sum\) \(different sizes\)"):
        spawn_workers(disagree)

    def one_missing(torch, dist, first):
        if first != 6:
            dist.all_reduce(torch.ones((1, PER_SIP), dp=dist.pe_rank_policy()))
            torch.ahbm.synchronize()

    with pytest.raises(Deadlock, match=r"all_reduce#0 over ranks \[0, 2, 4, 6\]: rank\(s\) 6 have not joined"):
        spawn_workers(one_missing)

    def point_to_point(torch, dist, first):
        dist.send(torch.ones(4), dst=first + PER_SIP)

    with pytest.raises(CollectiveError, match="send: with PE ranks .* a worker drives several ranks; point-to-point "
                                              "calls need a rank per worker"):
        spawn_workers(point_to_point)


@pytest.mark.parametrize("algorithm", ["ring", "hierarchical", "auto"])
def test_adr0012_t91_the_seed_bench_spreads_its_pe_ranks_over_the_sips_with_workers(tmp_path, capsys, algorithm):
    """`kernbench run ccl_allreduce --workers 4` with a ccl file of world_size 16: 4 PE ranks on each SIP, every
    rank right; `--workers` where the ranks fit the SIPs is one line."""
    path = tmp_path / "ccl.yaml"
    path.write_text(f"world_size: 16\ndefaults: {{algorithm: {algorithm}}}\n")
    session = Session("default", ccl=path)
    session.run(load_bench("ccl_allreduce"), session.torch, ["--workers", "4"])
    assert capsys.readouterr().out.strip() == f"{algorithm} (ws=16): 16 OK"
    [row] = session.ctx.collectives
    assert row["ranks"] == list(range(16))
    assert row["algorithm"] == ("ring" if algorithm == "ring" else "hierarchical")  # 64 B: auto takes the hierarchy
    session = Session("default")
    with pytest.raises(BenchUsageError, match="--workers 2: the 4 ranks fit the 4 SIPs, a worker each"):
        session.run(load_bench("ccl_allreduce"), session.torch, ["--workers", "2"])
