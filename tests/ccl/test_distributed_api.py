"""ADR 0012, issue 19: the whole collective and point-to-point API of `torch.distributed`, the world-size rule,
per-peer streams, and `torch.multiprocessing.Process`.

Values are checked against numpy; times are the algorithms' own, whose
closed forms ADR 0010's tests pin down (T39 shows the API adds none).
"""

from __future__ import annotations

import numpy as np
import pytest

from kernbench.ccl.errors import CollectiveError
from kernbench.cli.bench_loader import load_bench
from kernbench.numerics import assert_close
from kernbench.runtime_api.namespace.spawn import SpawnException
from kernbench.runtime_api.unsupported import UnsupportedError
from kernbench.session import Session
from tests.ccl.test_distributed import (ALGORITHMS, ccl, is_pe_world, over_pes, restore_current_ccl,  # noqa: F401
                                        run_world)
from tests.cli import REPO_ROOT

# ---- the covering matrix: collective × algorithm × layout, dtype and size rotating --------

COLLECTIVES = ["all_reduce", "all_gather_into_tensor", "reduce_scatter_tensor", "broadcast", "reduce",
               "all_to_all_single", "all_gather", "reduce_scatter", "scatter", "gather", "all_to_all"]
LAYOUTS = [("default", 2), ("default", 3), ("default", 4), ("large", 5), ("single_sip", 4), ("default", 7)]
DTYPES = {"f16": np.float16, "f32": np.float32, "i32": np.int32}
SIZES = [1, 37, 20_000]  # elements per rank and piece: one, odd, several 64 KiB slots


def matrix():
    cases = []
    for c, collective in enumerate(COLLECTIVES):
        for a, algorithm in enumerate(ALGORITHMS):
            topology, world = LAYOUTS[(c + a) % len(LAYOUTS)]
            dtype = list(DTYPES)[(c + 2 * a) % len(DTYPES)]
            size = SIZES[(2 * c + a) % len(SIZES)]
            cases.append((collective, algorithm, topology, world, dtype, size))
    return cases


def expected(collective: str, inputs: list[np.ndarray], root: int) -> list[np.ndarray]:
    """Each rank's result, from every rank's input (each n equal parts where the collective splits it)."""
    n = len(inputs)
    total = np.sum(inputs, axis=0, dtype=inputs[0].dtype)
    parts = [np.split(x, n) for x in inputs]
    return {
        "all_reduce": [total] * n,
        "all_gather": [np.concatenate([x[:len(x) // n] for x in inputs])] * n,
        "reduce_scatter": np.split(total, n),
        "broadcast": [inputs[root]] * n,
        "reduce": [total if r == root else inputs[r] for r in range(n)],
        "all_to_all": [np.concatenate([parts[s][r] for s in range(n)]) for r in range(n)],
        "scatter": parts[root],
        "gather": [np.concatenate([x[:len(x) // n] for x in inputs]) if r == root else None for r in range(n)],
    }[collective]


KIND = {"all_gather_into_tensor": "all_gather", "reduce_scatter_tensor": "reduce_scatter",
        "all_to_all_single": "all_to_all"}


def call(torch, collective: str, x, n: int, root: int):
    """Run one collective of rank input `x` (n·size elements); the rank's result as the tensor(s) it wrote."""
    dist, share = torch.distributed, x.numel() // n
    like = dict(dtype=x.dtype, device=x.device)
    if collective == "all_reduce":
        dist.all_reduce(x)
        return x
    if collective in ("broadcast", "reduce"):
        getattr(dist, collective)(x, root)
        return x
    if collective == "all_gather_into_tensor":
        out = torch.empty(n * share, **like)
        dist.all_gather_into_tensor(out, x[:share].clone())
        return out
    if collective == "reduce_scatter_tensor":
        out = torch.empty(share, **like)
        dist.reduce_scatter_tensor(out, x)
        return out
    if collective == "all_to_all_single":
        out = torch.empty(n * share, **like)
        dist.all_to_all_single(out, x)
        return out
    if collective == "all_gather":
        outs = [torch.empty(share, **like) for _ in range(n)]
        dist.all_gather(outs, x[:share].clone())
        return torch.cat(outs)
    if collective == "reduce_scatter":
        out = torch.empty(share, **like)
        dist.reduce_scatter(out, list(x.chunk(n)))
        return out
    if collective == "all_to_all":
        outs = [torch.empty(share, **like) for _ in range(n)]
        dist.all_to_all(outs, [part.clone() for part in x.chunk(n)])
        return torch.cat(outs)
    mine = dist.get_rank() == root
    if collective == "scatter":
        out = torch.empty(share, **like)
        dist.scatter(out, [part.clone() for part in x.chunk(n)] if mine else None, src=root)
        return out
    outs = [torch.empty(share, **like) for _ in range(n)] if mine else None
    dist.gather(x[:share].clone(), outs, dst=root)
    return torch.cat(outs) if mine else None


@pytest.mark.parametrize("collective, algorithm, topology, world, dtype, size", matrix())
def test_adr0012_t74_every_collective_under_every_algorithm_matches_numpy(collective, algorithm, topology, world,
                                                                          dtype, size):
    rng = np.random.default_rng([world, size, len(collective)])
    inputs = [rng.integers(-8, 9, world * size).astype(DTYPES[dtype]) for _ in range(world)]
    root = world - 1
    session = Session(topology, ccl=ccl(algorithm, world_size=world))
    pe_world = is_pe_world(topology, world)

    def fn(torch, rank):
        if pe_world:  # one worker: rank r's input is chunk r of the last dimension
            x = torch.tensor(np.concatenate(inputs).reshape(1, -1), dtype=dtype, dp=over_pes(torch, world))
            return np.split(call_pe(torch, collective, x, world, root).reshape(-1), world)
        result = call(torch, collective, torch.tensor(inputs[rank], dtype=dtype), world, root)
        return None if result is None else result.numpy()

    results = run_world(session, fn)
    got = results[0] if pe_world else [results[r] for r in range(world)]
    for rank, want in enumerate(expected(KIND.get(collective, collective), inputs, root)):
        if want is not None:
            assert_close(np.asarray(got[rank]).reshape(-1), want, dtype)
    [row] = session.ctx.collectives
    assert (row["collective"], row["configured_algorithm"], row["world_size"]) == (KIND.get(collective, collective), algorithm, world)


def call_pe(torch, collective: str, x, n: int, root: int) -> np.ndarray:
    """The PE-rank form: rank r's buffer is chunk r of the tensor's last dimension, and of each tensor of a list
    (ADR 0012); every rank's result, ranks first."""
    dist = torch.distributed
    share = x.shape[-1] // n // n  # what a rank gives each rank where the collective splits its input
    placed = dict(dtype=x.dtype, dp=over_pes(torch, n))
    pieces = x.numpy().reshape(n, n, share)  # rank r's k-th part of its input

    def chunked(rows: np.ndarray):
        """A tensor whose chunk r is rows[r]."""
        return torch.tensor(np.ascontiguousarray(rows).reshape(1, -1), **placed)

    def by_rank(tensors) -> np.ndarray:
        """Rank r's result: chunk r of each tensor of the list, in list order."""
        return np.stack([t.numpy().reshape(n, -1) for t in tensors], axis=1)

    if collective in ("all_reduce", "broadcast", "reduce"):
        getattr(dist, collective)(*((x,) if collective == "all_reduce" else (x, root)))
        return x.numpy()
    if collective in ("all_to_all_single", "all_gather_into_tensor", "reduce_scatter_tensor"):
        out = torch.empty(1, x.shape[-1] // n if collective == "reduce_scatter_tensor" else x.shape[-1], **placed)
        source = chunked(pieces[:, 0]) if collective == "all_gather_into_tensor" else x
        getattr(dist, collective)(out, source)
        return out.numpy()
    lists = [chunked(pieces[:, k]) for k in range(n)]  # list element k: every rank's k-th part
    outs = [torch.zeros(1, n * share, **placed) for _ in range(n)]
    out = torch.empty(1, n * share, **placed)
    if collective == "all_gather":
        dist.all_gather(outs, chunked(pieces[:, 0]))
        return by_rank(outs)
    if collective == "all_to_all":
        dist.all_to_all(outs, lists)
        return by_rank(outs)
    if collective == "gather":
        dist.gather(chunked(pieces[:, 0]), outs, dst=root)
        return by_rank(outs)
    if collective == "reduce_scatter":
        dist.reduce_scatter(out, lists)
    else:
        dist.scatter(out, lists, src=root)
    return out.numpy()


def test_adr0012_t75_uneven_all_to_all_splits_and_premul_and_bitwise_ops_match_numpy():
    n = 3
    rows = {(r, k): (r + 2 * k) % 3 for r in range(n) for k in range(n)}  # rows rank r sends rank k (zeros too)

    def fn(torch, rank):
        dist = torch.distributed
        send = [rows[rank, k] for k in range(n)]
        take = [rows[s, rank] for s in range(n)]
        x = torch.tensor(np.concatenate([np.full((rows[rank, k], 2), 10 * rank + k) for k in range(n)]),
                         dtype="i32")
        out = torch.empty(sum(take), 2, dtype="i32")
        dist.all_to_all_single(out, x, output_split_sizes=take, input_split_sizes=send)
        bits = torch.tensor(np.array([1 << rank, 7, 5 + rank]), dtype="i32")
        ors, ands, xors = bits.clone(), bits.clone(), bits.clone()
        dist.all_reduce(ors, op=dist.ReduceOp.BOR)
        dist.all_reduce(ands, op=dist.ReduceOp.BAND)
        dist.all_reduce(xors, op=dist.ReduceOp.BXOR)
        scaled = torch.full((4,), float(rank + 1))
        dist.all_reduce(scaled, op=dist._make_nccl_premul_sum(0.5))
        return out.numpy(), ors.numpy(), ands.numpy(), xors.numpy(), scaled.numpy()

    results = run_world(Session("default", ccl=ccl("ring", world_size=n)), fn)
    bits = [np.array([1 << r, 7, 5 + r]) for r in range(n)]
    for rank, (out, ors, ands, xors, scaled) in results.items():
        want = np.concatenate([np.full((rows[s, rank], 2), 10 * s + rank) for s in range(n)])
        assert np.array_equal(out, want)
        assert np.array_equal(ors, np.bitwise_or.reduce(bits))
        assert np.array_equal(ands, np.bitwise_and.reduce(bits))
        assert np.array_equal(xors, np.bitwise_xor.reduce(bits))
        assert np.array_equal(scaled, np.full(4, 0.5 * (1 + 2 + 3), dtype=np.float32))


@pytest.mark.parametrize("world", [2, 3, 4])
def test_adr0012_t76_the_tutorials_ring_of_isend_right_recv_left_runs_on_per_peer_streams(world):
    """Each direction between two ranks has its own stream, so a send to the right never waits behind a receive
    from the left (both on one stream deadlocked before); batch_isend_irecv runs a whole exchange at once."""
    def fn(torch, rank):
        dist = torch.distributed
        right, left = (rank + 1) % world, (rank - 1) % world
        mine, accum = torch.full((8,), float(rank + 1)), torch.full((8,), float(rank + 1))
        got = torch.empty(8)
        for _ in range(world - 1):
            request = dist.isend(mine, right)
            assert dist.recv(got, left) == left
            accum += got
            request.wait()
            mine = got.clone()
        both = [torch.empty(8), torch.empty(8)]
        works = dist.batch_isend_irecv([dist.P2POp(dist.isend, accum, right), dist.P2POp(dist.irecv, both[0], left),
                                        dist.P2POp(dist.isend, accum * 2, group_peer=left),
                                        dist.P2POp(dist.irecv, both[1], right)])
        for work in works:
            work.wait()
        return accum.numpy(), both[0].numpy(), both[1].numpy()

    results = run_world(Session("default", ccl=ccl("ring", world_size=world)), fn)
    total = world * (world + 1) / 2
    for values, from_left, from_right in results.values():
        assert np.all(values == total) and np.all(from_left == total) and np.all(from_right == 2 * total)


def test_adr0012_t77_world_size_is_ccl_yaml_else_init_else_spawn_else_the_sip_count():
    def sizes(session, bench):
        session.run(bench, session.torch)
        return session.ctx.collectives

    seen = {}

    def worker(rank, torch, init_size):
        torch.distributed.init_process_group("nccl", world_size=init_size)
        x = torch.ones(4, device=f"cuda:{rank}")
        torch.distributed.all_reduce(x)
        seen[rank] = (torch.distributed.get_world_size(), float(x[0]))

    for init_size in (-1, 2):  # spawn(2) on the 4-SIP machine: the world is the 2 workers
        session = Session("default", ccl=ccl())
        rows = sizes(session, lambda torch: torch.multiprocessing.spawn(worker, args=(torch, init_size), nprocs=2))
        assert seen == {0: (2, 2.0), 1: (2, 2.0)} and rows[0]["ranks"] == [0, 1]

    session = Session("default", ccl=ccl())  # initialized with the SIP count, then fewer workers: refused at spawn
    with pytest.raises(CollectiveError, match=r"spawn\(nprocs=2\): the world size is 4 \(the topology's 4 SIPs\)"):
        session.run(lambda torch: (torch.distributed.init_process_group(),
                                   torch.multiprocessing.spawn(worker, args=(torch, -1), nprocs=2)), session.torch)

    session = Session("default", ccl=ccl(world_size=3))  # explicit in ccl.yaml: init must agree
    with pytest.raises(SpawnException, match=r"init_process_group\(world_size=2\): <ccl mapping>: world_size gives "
                                             r"a world size of 3"):
        session.run(lambda torch: torch.multiprocessing.spawn(worker, args=(torch, 2), nprocs=3), session.torch)

    def not_spawning(torch):  # the seed bench's contract: no spawn and k ≠ SIP count drives PE ranks
        torch.distributed.init_process_group()
        x = torch.tensor(np.arange(1, 3, dtype=np.float32).repeat(4).reshape(1, 8),
                         dp=torch.distributed.pe_rank_policy())
        torch.distributed.all_reduce(x)
        return x.numpy()

    session = Session("default", ccl=ccl(world_size=2))
    assert np.all(session.run(not_spawning, session.torch) == 3.0)


@pytest.mark.parametrize("sips", [32, 64, 256])
def test_adr0012_t78_a_world_of_one_rank_per_sip_runs_at_the_sip_count_on_large_machines(tmp_path, sips):
    topology = tmp_path / f"switch_{sips}.yaml"
    topology.write_text((REPO_ROOT / "kernbench/configs/topology/large.yaml").read_text()
                        .replace("sips: {count: 32}", f"sips: {{count: {sips}}}"))
    session = Session(str(topology), ccl=ccl("ring"), timing_only=True)

    def fn(torch, rank):
        torch.distributed.all_reduce(torch.empty(64, dtype="f16"))
        return torch.distributed.get_world_size()

    assert set(run_world(session, fn).values()) == {sips}
    [row] = session.ctx.collectives
    assert row["ranks"] == list(range(sips))


@pytest.mark.parametrize("world", [2, 3, 5, 7, 8, 16])
def test_adr0012_t79_the_seed_bench_runs_unchanged_at_any_world_size_from_a_ccl_file_holding_only_it(
        tmp_path, capsys, world):
    path = tmp_path / "ccl.yaml"
    path.write_text(f"world_size: {world}\n")  # every other key comes from the shipped ccl.yaml
    session = Session("default", ccl=path)
    session.run(load_bench("ccl_allreduce"), session.torch)
    assert capsys.readouterr().out.strip() == f"auto (ws={world}): {world} OK"


def test_adr0012_t80_barrier_destroy_subgroups_and_empty_tensors_have_pytorchs_semantics():
    def fn(torch, rank):
        dist = torch.distributed
        empty = torch.empty(0)
        dist.all_reduce(empty)  # a no-op, as in PyTorch (it still matches the peers' call)
        mine, groups = dist.new_subgroups(2)
        assert [g.ranks for g in groups] == [(0, 1), (2, 3)] and rank in mine.ranks
        x = torch.full((4,), float(rank))
        dist.all_reduce(x, group=mine)
        assert dist.is_nccl_available() and dist.reduce_op is dist.ReduceOp
        dist.monitored_barrier()
        if rank == 3:
            dist.destroy_process_group()
            with pytest.raises(CollectiveError, match="not initialized in this worker"):
                dist.all_reduce(x)
            with pytest.raises(CollectiveError, match="not initialized in this worker"):
                dist.destroy_process_group()
        return x.numpy()

    session = Session("default", ccl=ccl())
    results = run_world(session, fn)
    assert {r: float(v[0]) for r, v in results.items()} == {0: 1.0, 1: 1.0, 2: 5.0, 3: 5.0}
    assert [row["collective"] for row in session.ctx.collectives] == ["all_reduce", "all_reduce", "barrier"]


def test_adr0012_t81_misuse_is_one_line_naming_rank_call_and_argument():
    cases = {
        "list": (lambda torch, dist: dist.all_gather([torch.empty(4)], torch.empty(4)),
                 "all_gather: tensor_list must be a list of 2 tensors, one per rank of the group; got 1 tensors"),
        "p2pop": (lambda torch, dist: dist.P2POp(dist.send, torch.empty(1), 1),
                  "P2POp(op=<bound method"),
        "splits": (lambda torch, dist: dist.all_to_all_single(torch.empty(4), torch.empty(4),
                                                              input_split_sizes=[1, 2]),
                   "all_to_all_single: input_split_sizes=[1, 2] must be 2 non-negative row counts summing to the "
                   "input's 4 rows"),
        "attribute": (lambda torch, dist: dist.all_gather_coalesced, "torch.distributed.all_gather_coalesced"),
    }
    for name, (misuse, message) in cases.items():
        def fn(torch, rank):
            if rank == 0:
                misuse(torch, torch.distributed)

        with pytest.raises((CollectiveError, UnsupportedError)) as error:
            run_world(Session("default", ccl=ccl(world_size=2)), fn)
        assert str(error.value).startswith(message), name

    def disagree(torch, rank):  # rank 0 sends 2 rows to rank 1, which expects 3
        torch.distributed.all_to_all_single(torch.empty(4), torch.empty(4), output_split_sizes=[3, 1] if rank else
                                            [2, 2], input_split_sizes=[2, 2])

    with pytest.raises(CollectiveError, match=r"all_to_all_single#0: rank 0 sends 2 elements to rank 1, which "
                                              r"expects 3 from it"):
        run_world(Session("default", ccl=ccl(world_size=2)), disagree)


def test_adr0012_t82_multiprocessing_process_starts_workers_that_name_their_rank_and_fail_loudly():
    session = Session("default", ccl=ccl())
    seen = {}

    def init_process(rank, size):
        session.torch.distributed.init_process_group("gloo", rank=rank, world_size=size)
        x = session.torch.full((2,), float(rank + 1), device=f"cuda:{rank}")
        session.torch.distributed.all_reduce(x)
        seen[rank] = float(x[0])
        if rank == 1:
            raise CollectiveError("rank 1 gave up")

    def bench(torch):
        mp = torch.multiprocessing
        mp.set_start_method("spawn")
        assert mp.get_context("spawn") is mp
        processes = [mp.Process(target=init_process, args=(rank, 2)) for rank in range(2)]
        for p in processes:
            p.start()
        processes[0].join()
        assert processes[0].exitcode == 0
        processes[1].join()

    with pytest.raises(SpawnException, match="rank 1 gave up"):
        session.run(bench, session.torch)
    assert seen == {0: 3.0, 1: 3.0}


def test_adr0012_t83_pytorchs_distributed_tutorial_runs_as_a_bench(capsys):
    session = Session("default")
    session.run(load_bench("dist_tutorial"), session.torch)
    assert capsys.readouterr().out.strip().endswith("6 sections of the distributed tutorial: OK")
    rows = session.ctx.collectives
    assert {row["collective"] for row in rows} >= {"send", "all_reduce", "broadcast", "reduce", "scatter", "gather",
                                                   "all_gather", "all_to_all", "barrier"}


@pytest.mark.parametrize("topology, world", [("default", 7), ("single_sip", 4)])
@pytest.mark.parametrize("algorithm", ["ring", "direct"])
def test_adr0012_t85_list_forms_on_pe_ranks_read_chunk_r_of_each_list_tensor_as_rank_rs(topology, world, algorithm):
    """With PE ranks one worker stands for every rank: chunk r of the last dimension of a tensor, and of each
    tensor of a list, is rank r's (2-row tensors, so a chunk is a strided block)."""
    n, w, root = world, 3, 1
    rng = np.random.default_rng(world)
    block = lambda a, r: a[:, r * w:(r + 1) * w]  # noqa: E731  (rank r's chunk)
    mine = rng.integers(-9, 10, (2, n * w)).astype(np.float32)
    parts = [rng.integers(-9, 10, (2, n * w)).astype(np.float32) for _ in range(n)]  # a list: element k
    session = Session(topology, ccl=ccl(algorithm, world_size=world))

    def fn(torch, rank):
        dist = torch.distributed
        placed = dict(dtype="f32", dp=dist.pe_rank_policy())
        x, lists = torch.tensor(mine, **placed), [torch.tensor(p, **placed) for p in parts]
        fresh = lambda: [torch.zeros(2, n * w, **placed) for _ in range(n)]  # noqa: E731
        gathered, exchanged, at_root = fresh(), fresh(), fresh()
        reduced, scattered = torch.empty(2, n * w, **placed), torch.empty(2, n * w, **placed)
        dist.all_gather(gathered, x)
        dist.all_to_all(exchanged, lists)
        dist.gather(x, at_root, dst=root)
        dist.reduce_scatter(reduced, lists)
        dist.scatter(scattered, lists, src=root)
        square = torch.tensor(np.arange(n * n * n, dtype=np.float32).reshape(n, n * n), **placed)
        swapped = torch.empty(n, n * n, **placed)  # rank r's chunk: n rows of n, row k for rank k
        dist.all_to_all_single(swapped, square, output_split_sizes=[1] * n, input_split_sizes=[1] * n)
        with pytest.raises(CollectiveError, match=r"input_split_sizes=\[2, 0, .*\] are unequal, but with PE ranks"):
            dist.all_to_all_single(swapped, square, input_split_sizes=[2, 0] + [1] * (n - 2))
        assert all((swapped.numpy()[j, k * n:(k + 1) * n] == square.numpy()[k, j * n:(j + 1) * n]).all()
                   for j in range(n) for k in range(n))
        return [[t.numpy() for t in ts] for ts in (gathered, exchanged, at_root, [reduced], [scattered])]

    gathered, exchanged, at_root, [reduced], [scattered] = run_world(session, fn)[0]
    for r in range(n):
        for k in range(n):
            np.testing.assert_array_equal(block(gathered[k], r), block(mine, k))  # rank k's tensor, on every rank
            np.testing.assert_array_equal(block(exchanged[k], r), block(parts[r], k))  # rank k's parts[r]
        np.testing.assert_array_equal(block(reduced, r), sum(block(parts[r], j) for j in range(n)))
        np.testing.assert_array_equal(block(scattered, r), block(parts[r], root))  # the root's parts[r]
        np.testing.assert_array_equal(block(at_root[r], root), block(mine, r))  # rank r's tensor, at the root
    assert [row["collective"] for row in session.ctx.collectives] == [
        "all_gather", "all_to_all", "gather", "reduce_scatter", "scatter", "all_to_all"]
