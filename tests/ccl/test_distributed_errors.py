"""ADR 0012: every misuse of `torch.distributed` is one error naming the call, the ranks and what to do.

A call that does not match its peers' fails on the host, at the call,
naming both ranks; a rank that never calls ends in the engine's `Deadlock`
report naming the collective and the rank that is missing, never in a hang.
"""

from __future__ import annotations

import pytest

from kernbench.ccl.errors import CollectiveError
from kernbench.errors import KernbenchError
from kernbench.runtime_api.namespace.spawn import SpawnException
from kernbench.session import Session
from kernbench.sim_engine import Deadlock
from kernbench.topology import load_topology
from tests.ccl.test_distributed import ccl, over_pes, restore_current_ccl, run_world  # noqa: F401 (autouse fixture)


def spawn_failures(session: Session, worker, nprocs: int, *, init: bool = True) -> dict[int, str]:
    """Run `worker(torch, rank)` on `nprocs` spawned ranks; the message of each rank that raised."""
    torch = session.torch

    def rank_main(rank: int) -> None:
        torch.ahbm.set_device(rank)
        worker(torch, rank)

    def bench(torch) -> None:
        if init:
            torch.distributed.init_process_group(backend="ahbm")
        torch.multiprocessing.spawn(rank_main, nprocs=nprocs)

    with pytest.raises(SpawnException) as failure:
        session.run(bench, torch)
    assert all(isinstance(error, KernbenchError) for error in failure.value.failures.values())
    return {rank: str(error) for rank, error in failure.value.failures.items()}


def test_adr0012_t15_a_call_before_init_process_group_says_which_call_to_make():
    failures = spawn_failures(Session("default", ccl=ccl()), lambda torch, rank: torch.distributed.all_reduce(
        torch.ones(4)), 2, init=False)
    assert set(failures) == {0, 1}
    assert failures[0] == ("all_reduce: the default process group is not initialized in this worker; call "
                           "torch.distributed.init_process_group(backend='ahbm') first")
    session = Session("default", ccl=ccl())
    with pytest.raises(CollectiveError, match="get_world_size: the default process group is not initialized"):
        session.run(lambda torch: torch.distributed.get_world_size(), session.torch)


def test_adr0012_t16_a_rank_outside_the_group_or_the_world_is_named():
    def outsider(torch, rank):
        group = torch.distributed.new_group([1, 3])
        torch.distributed.all_reduce(torch.ones(4), group=group)

    failures = spawn_failures(Session("default", ccl=ccl()), outsider, 4)
    assert failures == {0: "all_reduce: rank 0 is not in group group[1, 3] (ranks [1, 3])",
                        2: "all_reduce: rank 2 is not in group group[1, 3] (ranks [1, 3])"}

    failures = spawn_failures(Session("default", ccl=ccl()), lambda torch, rank: torch.distributed.new_group([1, 5]), 4)
    assert failures[0] == "new_group(ranks=[1, 5]): ranks must be a non-empty subset of 0..3"

    session = Session("default", ccl=ccl(world_size=3))
    with pytest.raises(CollectiveError) as error:  # more workers than ranks: refused at spawn, not at a collective
        session.run(lambda torch: torch.multiprocessing.spawn(lambda rank: None, nprocs=4), session.torch)
    assert str(error.value) == ("spawn(nprocs=4): the world size is 3 (<ccl mapping>: world_size); spawn one worker "
                                "per rank")

    session = Session("default", ccl=ccl(world_size=7))  # above the SIP count workers share the ranks out evenly
    with pytest.raises(CollectiveError) as error:
        session.run(lambda torch: torch.multiprocessing.spawn(lambda rank: None, nprocs=2), session.torch)
    assert str(error.value) == ("spawn(nprocs=2): the world size is 7 (<ccl mapping>: world_size); 7 ranks do not "
                                "split over 2 workers; above the SIP count spawn a number of workers that divides the "
                                "world size (each then drives world_size/nprocs PE ranks of its SIP)")
    session = Session("default", ccl=ccl(world_size=16))
    with pytest.raises(CollectiveError, match=r"8 workers on 4 SIPs; each worker runs on a SIP of its own"):
        session.run(lambda torch: torch.multiprocessing.spawn(lambda rank: None, nprocs=8), session.torch)
    pes = load_topology("default").pes_per_sip
    session = Session("default", ccl=ccl(world_size=2 * pes + 2))
    with pytest.raises(CollectiveError, match=rf"2 workers would drive {pes + 1} PE ranks each, more than the {pes} "
                                              "PEs of a SIP"):
        session.run(lambda torch: torch.multiprocessing.spawn(lambda rank: None, nprocs=2), session.torch)


@pytest.mark.parametrize("differs, call_of_rank_2, problem", [
    ("size", "all_reduce(5 f32 elements, op=sum)", "different sizes"),
    ("dtype", "all_reduce(4 f16 elements, op=sum)", "different dtypes"),
    ("collective", "broadcast(4 f32 elements, root=0)", "a different collective"),
    ("op", "all_reduce(4 f32 elements, op=max)", "different reduce ops"),
])
def test_adr0012_t17_calls_that_do_not_match_across_ranks_name_both_ranks(differs, call_of_rank_2, problem):
    def worker(torch, rank):
        odd = rank == 2
        x = torch.ones(5 if odd and differs == "size" else 4, dtype="f16" if odd and differs == "dtype" else "f32")
        if odd and differs == "collective":
            torch.distributed.broadcast(x, src=0)
        else:
            torch.distributed.all_reduce(x, op="max" if odd and differs == "op" else "sum")
        x.numpy()

    failures = spawn_failures(Session("default", ccl=ccl()), worker, 4)
    assert failures == {2: f"all_reduce#0: ranks disagree: rank 0 called all_reduce(4 f32 elements, op=sum), "
                           f"rank 2 called {call_of_rank_2} ({problem})"}


def test_adr0012_t18_roots_and_point_to_point_sides_must_match_too():
    def worker(torch, rank):
        torch.distributed.broadcast(torch.ones(4), src=1 if rank == 3 else 0)

    failures = spawn_failures(Session("default", ccl=ccl()), worker, 4)
    assert failures[3].endswith("rank 0 called broadcast(4 f32 elements, root=0), rank 3 called "
                                "broadcast(4 f32 elements, root=1) (different roots)")

    def sizes(torch, rank):
        if rank == 0:
            torch.distributed.send(torch.ones(8), dst=1)
        else:
            torch.distributed.recv(torch.ones(6), src=0)

    failures = spawn_failures(Session("default", ccl=ccl(world_size=2)), sizes, 2)
    assert "send#0[0->1]: ranks disagree: rank 0 called send(8 f32 elements), rank 1 called recv(6 f32 elements)" \
           in next(iter(failures.values()))


def test_adr0012_t19_a_rank_that_never_joins_is_a_deadlock_naming_the_collective_and_the_rank():
    def worker(torch, rank):
        x = torch.ones(4)
        if rank != 3:
            torch.distributed.all_reduce(x)
            x.numpy()

    session = Session("default", ccl=ccl())
    with pytest.raises(Deadlock) as error:
        run_world(session, worker)
    assert isinstance(error.value, KernbenchError)
    message = str(error.value)
    assert "'all_reduce#0 over ranks [0, 1, 2, 3]: rank(s) 3 have not joined'" in message
    assert all(f"process 'ahbm:{rank}.default: all_reduce#0' waits on" in message for rank in (0, 1, 2))

    def group_worker(torch, rank):
        group = torch.distributed.new_group([0, 1, 2])
        x = torch.ones(4)
        if rank == 0:
            torch.distributed.all_reduce(x, group=group)
            x.numpy()

    with pytest.raises(Deadlock, match=r"all_reduce#0\[group\[0, 1, 2\]\] over ranks \[0, 1, 2\]: "
                                       r"rank\(s\) 1, 2 have not joined"):
        run_world(Session("default", ccl=ccl()), group_worker)


def test_adr0012_t20_a_tensor_on_another_ranks_device_points_to_set_device():
    failures = spawn_failures(Session("default", ccl=ccl()),
                              lambda torch, rank: torch.distributed.all_reduce(torch.ones(4, device="ahbm:0")), 4)
    assert list(failures) == [1, 2, 3]
    assert failures[1].startswith("all_reduce on rank 1: tensor ")
    assert failures[1].endswith("is on ahbm:0, but with world_size 4 rank 1 works on ahbm:1; call "
                                "torch.ahbm.set_device(rank) in the worker")


def test_adr0012_t21_pe_rank_tensors_must_split_into_one_chunk_per_rank_on_a_pe_each():
    session = Session("single_sip", ccl=ccl(world_size=4))
    with pytest.raises(CollectiveError) as error:
        run_world(session, lambda torch, rank: torch.distributed.all_reduce(
            torch.ones(2, 10, dp=over_pes(torch, 2), name="odd")))
    assert str(error.value) == ("all_reduce: tensor 'odd' of shape (2, 10) has a last dimension of 10, which does not "
                                "split into 4 equal chunks (one per PE rank)")

    session = Session("single_sip", ccl=ccl(world_size=4))
    with pytest.raises(CollectiveError) as error:
        run_world(session, lambda torch, rank: torch.distributed.all_reduce(torch.ones(1, 8, name="one_pe")))
    message = str(error.value)
    assert "chunks 0 and 1 of tensor 'one_pe' (one per PE rank) both start on cube 0 PE 0" in message
    assert "dp=torch.distributed.pe_rank_policy()" in message


def test_adr0012_t22_point_to_point_needs_a_named_peer_and_a_rank_per_worker():
    def any_source(torch, rank):
        if rank == 1:
            torch.distributed.recv(torch.ones(4))

    failures = spawn_failures(Session("default", ccl=ccl(world_size=2)), any_source, 2)
    assert failures == {1: "recv on rank 1: peer rank None is not another rank of group WORLD (ranks [0, 1]); "
                           "receiving from any source is not supported"}

    failures = spawn_failures(Session("default", ccl=ccl(world_size=2)),
                              lambda torch, rank: torch.distributed.send(torch.ones(4), dst=rank), 2)
    assert "peer rank 0 is not another rank of group WORLD" in failures[0]

    session = Session("single_sip", ccl=ccl(world_size=4))
    with pytest.raises(CollectiveError, match="point-to-point calls need a rank per worker"):
        run_world(session, lambda torch, rank: torch.distributed.send(torch.ones(1, 4, dp=over_pes(torch, 4)), dst=1))


def test_adr0012_t23_unknown_reduce_ops_roots_and_backends_are_named():
    failures = spawn_failures(Session("default", ccl=ccl(world_size=2)),
                              lambda torch, rank: torch.distributed.all_reduce(torch.ones(4), op="mean"), 2)
    assert failures[0] == ("all_reduce: unknown reduce op 'mean'; expected one of ReduceOp.SUM ('sum'), "
                           "ReduceOp.PRODUCT ('product'), ReduceOp.MIN ('min'), ReduceOp.MAX ('max'), "
                           "ReduceOp.AVG ('avg'), ReduceOp.BAND ('band'), ReduceOp.BOR ('bor'), ReduceOp.BXOR ('bxor'), "
                           "ReduceOp.PREMUL_SUM ('premul_sum')")
    failures = spawn_failures(Session("default", ccl=ccl(world_size=2)),
                              lambda torch, rank: torch.distributed.broadcast(torch.ones(4), src=7), 2)
    assert failures[0] == "broadcast: src=7 is not a rank of group WORLD (ranks [0, 1])"
    session = Session("default", ccl=ccl())
    with pytest.raises(CollectiveError, match="init_process_group\\(backend='mpi'\\): the simulated device's "
                                              "backend is 'ahbm'"):
        session.run(lambda torch: torch.distributed.init_process_group(backend="mpi"), session.torch)
    session = Session("default", ccl=ccl())
    session.run(lambda torch: torch.distributed.init_process_group(backend="nccl"), session.torch)  # a GPU script's
