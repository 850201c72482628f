"""ADR 0012: `torch.distributed` gives numpy's answer on both rank paths, the way PyTorch's API promises.

Rank-per-SIP worlds (world size up to the SIP count) spawn one worker per
rank, each on `ahbm:rank`; PE-rank worlds (ccl.yaml's `world_size` above the
SIP count) run one worker holding a tensor whose last dimension is one chunk
per rank, spread over that many PEs. Inputs are small integers in f16/bf16
(every sum of up to 16 of them is exact, whatever the reduction order) and
uniform floats in f32; products use ±½, ±1, ±2. Results are compared with
`assert_close` and must be bitwise equal on every rank.
"""

from __future__ import annotations

import copy
import functools
import itertools

import numpy as np
import pytest

from kernbench.runtime_api import current_run
from kernbench.ccl.install import SHIPPED_CCL_PATH, load_ccl_config
from kernbench.dtypes import resolve_dtype
from kernbench.numerics import assert_close
from kernbench.policy import DPPolicy, PlacementError
from kernbench.report import format_report, run_report
from kernbench.session import Session
from kernbench.topology import load_topology
from tests.spawned import run_ranks

ALGORITHMS = ["ring", "tree", "direct", "halving_doubling"]
DTYPES = ["f16", "bf16", "f32"]
OPS = ["sum", "avg", "min", "max", "product"]
REFERENCE = {"sum": np.sum, "avg": np.mean, "min": np.min, "max": np.max, "product": np.prod}


# ---- harness -------------------------------------------------------------------------------

@pytest.fixture(autouse=True)
def restore_current_ccl(monkeypatch):
    """A Session's run becomes the process's current run (whose ccl config `load_ccl_config()` gives); it must
    not outlive the test."""
    monkeypatch.setattr(current_run, "_current", current_run._current)


def ccl(algorithm: str = "ring", world_size: int | None = None, **defaults) -> dict:
    """The shipped ccl.yaml as a mapping: `algorithm`, an explicit `world_size` and `defaults` keys laid over it."""
    data = copy.deepcopy(dict(load_ccl_config(SHIPPED_CCL_PATH)))
    data["defaults"].update(algorithm=algorithm, **defaults)
    if world_size is not None:
        data["world_size"] = world_size
    return data


def run_world(session: Session, fn) -> dict:
    """`fn(torch, rank)` on every rank after `init_process_group`; its results by rank.

    Up to the SIP count one spawned worker per rank, on `ahbm:rank`, each
    calling `init_process_group` itself as PyTorch processes do; beyond it the
    single worker (rank 0). A rank's error is re-raised as itself.
    """
    torch = session.torch
    results = {}

    def worker(rank: int) -> None:
        torch.ahbm.set_device(rank)
        torch.distributed.init_process_group(backend="ahbm")
        results[rank] = fn(torch, rank)

    def bench(torch) -> None:
        torch.distributed.init_process_group(backend="ahbm")
        world_size = torch.distributed.get_world_size()
        if world_size > torch.ahbm.device_count():
            results[0] = fn(torch, 0)
        else:
            torch.multiprocessing.spawn(worker, nprocs=world_size)

    run_ranks(session, bench)
    return results


def over_pes(torch, n: int):
    """A placement of the last dimension over exactly n PEs of one SIP (n need not be the world size)."""
    layout = torch.spec["cube"]["pe_layout"]
    cubes = torch.spec["sip"]["cube_mesh"]["w"] * torch.spec["sip"]["cube_mesh"]["h"]
    return torch.DPPolicy.over_pes(n, cubes, len(layout["corners"]) * layout["pe_per_corner"])


@functools.cache
def sip_count(topology: str) -> int:
    return load_topology(topology).n_sips


def is_pe_world(topology: str, world_size: int) -> bool:
    return world_size > sip_count(topology)


def rank_inputs(n: int, shape: tuple[int, ...], dtype: str, op: str = "sum", seed: int = 0) -> list[np.ndarray]:
    """One array per rank: ±½/±1/±2 for products, small integers in f16/bf16, uniform floats in f32."""
    rng = np.random.default_rng([seed, n, *shape])
    if op == "product":
        return [rng.choice([-2.0, -1.0, -0.5, 0.5, 1.0, 2.0], shape) for _ in range(n)]
    if dtype == "f32":
        return [rng.uniform(-1.0, 1.0, shape) for _ in range(n)]
    return [rng.integers(-8, 9, shape).astype(np.float64) for _ in range(n)]


def as_stored(values: np.ndarray, dtype: str) -> np.ndarray:
    """`values` rounded to `dtype` as the device holds them, back in float64 (the reference computes from these)."""
    return values.astype(resolve_dtype(dtype).numpy).astype(np.float64)


def all_reduce_everywhere(topology: str, algorithm: str, n: int, dtype: str, shape: tuple[int, int], op: str = "sum",
                          **defaults) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """All-reduce rank r's array r over a world of n ranks; (each rank's result, the inputs as stored)."""
    session = Session(topology, ccl=ccl(algorithm, world_size=n, **defaults))
    data = [as_stored(x, dtype) for x in rank_inputs(n, shape, dtype, op)]
    if is_pe_world(topology, n):
        def fn(torch, rank):
            x = torch.tensor(np.concatenate(data, axis=-1), dtype=dtype, dp=over_pes(torch, n))
            torch.distributed.all_reduce(x, op=op)
            return np.split(x.numpy(), n, axis=-1)

        return run_world(session, fn)[0], data

    def fn(torch, rank):
        x = torch.tensor(data[rank], dtype=dtype)
        torch.distributed.all_reduce(x, op=op)
        return x.numpy()

    results = run_world(session, fn)
    return [results[r] for r in range(n)], data


def assert_ranks_agree(outputs: list[np.ndarray], expected: np.ndarray, dtype: str) -> None:
    for output in outputs:
        assert_close(output, expected, dtype)
        assert output.tobytes() == outputs[0].tobytes()


# ---- the all_reduce matrix -----------------------------------------------------------------

# (topology, world size): rank per SIP up to the SIP count (default: 4, single_sip: 1, large: 32), PE ranks above.
LAYOUTS = [("default", 1), ("default", 2), ("default", 3), ("default", 4), ("single_sip", 1),
           ("large", 7), ("large", 8), ("large", 16),
           ("single_sip", 3), ("single_sip", 7), ("single_sip", 8), ("single_sip", 16),
           ("default", 7), ("default", 8), ("default", 16)]
# Per-rank (rows, columns): one element, 1001 (odd, under one 64 KiB slot), 40 000 (several slots in every dtype).
SHAPES = [(1, 1), (7, 143), (4, 10_000)]


def covering_design() -> list[tuple[str, str, int, str, tuple[int, int]]]:
    """Every (algorithm, layout) pair once; dtype and size rotate so that every pair of factor levels meets.

    Case (layout i, algorithm a) takes dtype (i + a) mod 3 and size (i + 2a) mod 3: for a fixed layout the
    four algorithms reach all three dtypes and sizes, for a fixed algorithm the fifteen layouts do, and
    (i + a, i + 2a) mod 3 is invertible in (i, a) mod 3, so every dtype meets every size.
    """
    return [(algorithm, topology, n, DTYPES[(i + a) % 3], SHAPES[(i + 2 * a) % 3])
            for i, (topology, n) in enumerate(LAYOUTS) for a, algorithm in enumerate(ALGORITHMS)]


def case_id(case) -> str:
    algorithm, topology, n, dtype, (rows, cols) = case
    return f"{algorithm}-{topology}-ws{n}-{dtype}-{rows * cols}"


@pytest.mark.parametrize("case", covering_design(), ids=case_id)
@pytest.mark.quick
def test_adr0012_t1_all_reduce_matches_numpy_over_the_covering_matrix(case):
    algorithm, topology, n, dtype, shape = case
    outputs, data = all_reduce_everywhere(topology, algorithm, n, dtype, shape)
    assert len(outputs) == n
    assert_ranks_agree(outputs, np.sum(data, axis=0), dtype)


@pytest.mark.quick
def test_adr0012_t2_the_matrix_covers_every_pair_of_factor_levels():
    design = covering_design()
    factors = [[c[0] for c in design], [c[1:3] for c in design], [c[3] for c in design], [c[4] for c in design]]
    levels = [ALGORITHMS, LAYOUTS, DTYPES, SHAPES]
    for (i, column_i), (j, column_j) in itertools.combinations(enumerate(factors), 2):
        met = set(zip(column_i, column_j))
        missing = [(x, y) for x in levels[i] for y in levels[j] if (x, y) not in met]
        assert not missing, f"factors {i} and {j} never meet at {missing[:4]}"
    # Both rank paths on every topology that has them, odd world sizes included.
    assert {(t, is_pe_world(t, n)) for t, n in LAYOUTS} == {("default", False), ("default", True),
                                                            ("single_sip", False), ("single_sip", True),
                                                            ("large", False)}
    assert {n for _, n in LAYOUTS} >= {1, 2, 3, 4, 7, 8, 16}


MEBIBYTE_CASES = [  # (algorithm, topology, world size, dtype, per-rank shape of 1 MiB)
    ("ring", "default", 4, "f16", (8, 65_536)),
    ("tree", "large", 7, "bf16", (8, 65_536)),
    ("halving_doubling", "single_sip", 8, "f32", (4, 65_536)),
    ("direct", "default", 5, "f16", (8, 65_536)),
]


@pytest.mark.parametrize("case", MEBIBYTE_CASES, ids=case_id)
def test_adr0012_t3_mebibyte_all_reduces_are_exact_on_both_rank_paths(case):
    algorithm, topology, n, dtype, shape = case
    assert shape[0] * shape[1] * resolve_dtype(dtype).itemsize == 1 << 20
    outputs, data = all_reduce_everywhere(topology, algorithm, n, dtype, shape)
    assert_ranks_agree(outputs, np.sum(data, axis=0), dtype)


# ---- reduce ops, gathers, rooted and point-to-point calls ----------------------------------

@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("op", OPS)
def test_adr0012_t4_every_reduce_op_matches_numpy_on_both_rank_paths(algorithm, op):
    """3 ranks on 3 SIPs of default.yaml, and 5 PE ranks of single_sip.yaml; 257 elements (odd)."""
    dtype = DTYPES[(ALGORITHMS.index(algorithm) + OPS.index(op)) % 3]
    for topology, n in [("default", 3), ("single_sip", 5)]:
        outputs, data = all_reduce_everywhere(topology, algorithm, n, dtype, (1, 257), op)
        assert_ranks_agree(outputs, REFERENCE[op](np.array(data), axis=0), dtype)


def gather_and_scatter(topology: str, algorithm: str, n: int, dtype: str, count: int):
    """all_gather_into_tensor of `count` and reduce_scatter_tensor of n·count per rank: (gathered, scattered, data)."""
    session = Session(topology, ccl=ccl(algorithm, world_size=n))
    data = [as_stored(x, dtype) for x in rank_inputs(n, (n * count,), dtype)]
    pe_world = is_pe_world(topology, n)

    def fn(torch, rank):
        if pe_world:  # chunk r of each tensor is rank r's buffer
            shard = torch.tensor(np.concatenate([x[:count] for x in data])[None], dtype=dtype, dp=over_pes(torch, n))
            gathered = torch.empty(1, n * n * count, dtype=dtype, dp=over_pes(torch, n))
            full = torch.tensor(np.concatenate(data)[None], dtype=dtype, dp=over_pes(torch, n))
            scattered = torch.empty(1, n * count, dtype=dtype, dp=over_pes(torch, n))
        else:
            shard = torch.tensor(data[rank][:count], dtype=dtype)
            gathered = torch.empty(n * count, dtype=dtype)
            full = torch.tensor(data[rank], dtype=dtype)
            scattered = torch.empty(count, dtype=dtype)
        torch.distributed.all_gather_into_tensor(gathered, shard)
        torch.distributed.reduce_scatter_tensor(scattered, full, op="sum")
        if pe_world:
            return np.split(gathered.numpy()[0], n), np.split(scattered.numpy()[0], n)
        return gathered.numpy(), scattered.numpy()

    results = run_world(session, fn)
    if pe_world:
        gathered, scattered = results[0]
    else:
        gathered, scattered = [results[r][0] for r in range(n)], [results[r][1] for r in range(n)]
    return gathered, scattered, data


@pytest.mark.parametrize("algorithm", ["ring", "direct"])
@pytest.mark.parametrize("topology, n", [("default", 3), ("default", 4), ("single_sip", 7), ("default", 8)])
@pytest.mark.parametrize("count", [1, 333])
def test_adr0012_t5_all_gather_and_reduce_scatter_match_numpy(algorithm, topology, n, count):
    dtype = DTYPES[(n + count) % 3]
    gathered, scattered, data = gather_and_scatter(topology, algorithm, n, dtype, count)
    assert_ranks_agree(gathered, np.concatenate([x[:count] for x in data]), dtype)
    total = np.sum(data, axis=0)
    for rank, out in enumerate(scattered):
        assert_close(out, total[rank * count:(rank + 1) * count], dtype)


@pytest.mark.parametrize("algorithm, ran", [("tree", "ring"), ("halving_doubling", "halving_doubling")])
@pytest.mark.parametrize("topology, n", [("default", 4), ("single_sip", 4)])
@pytest.mark.quick
def test_adr0012_t6_algorithms_without_a_gather_schedule_run_their_fallback_and_say_so(algorithm, ran, topology, n):
    """tree has no gathers: they run ring (NCCL's fallback); halving_doubling has its own at powers of two."""
    gathered, scattered, data = gather_and_scatter(topology, algorithm, n, "f32", 3)
    assert_ranks_agree(gathered, np.concatenate([x[:3] for x in data]), "f32")
    rows = current_run.current_torch().distributed._ctx.collectives
    assert [(row["collective"], row["algorithm"], row["configured_algorithm"]) for row in rows] == [
        ("all_gather", ran, algorithm), ("reduce_scatter", ran, algorithm)]


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.quick
def test_adr0012_t7_broadcast_and_reduce_honour_src_and_dst_on_both_rank_paths(algorithm):
    """Global src/dst on the world; group_src/group_dst in a subgroup; reduce leaves non-roots untouched."""
    count = 129
    session = Session("default", ccl=ccl(algorithm))
    data = [as_stored(x, "bf16") for x in rank_inputs(4, (count,), "bf16")]

    def fn(torch, rank):
        dist = torch.distributed
        sent = torch.tensor(data[rank], dtype="bf16")
        dist.broadcast(sent, src=2)
        summed = torch.tensor(data[rank], dtype="bf16")
        dist.reduce(summed, dst=1, op="max")
        pair = dist.new_group([1, 3])
        from_group = torch.tensor(data[rank], dtype="bf16")
        if rank in (1, 3):
            dist.broadcast(from_group, group=pair, group_src=1)  # group rank 1 is global rank 3
        return sent.numpy(), summed.numpy(), from_group.numpy()

    results = run_world(session, fn)
    assert_ranks_agree([results[r][0] for r in range(4)], data[2], "bf16")
    assert_close(results[1][1], np.max(data, axis=0), "bf16")
    for rank in (0, 2, 3):
        assert_close(results[rank][1], data[rank], "bf16")
    assert_close(results[1][2], data[3], "bf16")
    assert_close(results[0][2], data[0], "bf16")

    n = 7  # PE ranks of one SIP: chunk r is rank r's buffer
    session = Session("single_sip", ccl=ccl(algorithm, world_size=n))
    chunks = [as_stored(x, "f32") for x in rank_inputs(n, (1, 5), "f32")]

    def pe_fn(torch, rank):
        sent = torch.tensor(np.concatenate(chunks, axis=1), dtype="f32", dp=over_pes(torch, n))
        torch.distributed.broadcast(sent, src=4)
        averaged = torch.tensor(np.concatenate(chunks, axis=1), dtype="f32", dp=over_pes(torch, n))
        torch.distributed.reduce(averaged, dst=6, op="avg")
        return np.split(sent.numpy(), n, axis=1), np.split(averaged.numpy(), n, axis=1)

    sent, averaged = run_world(session, pe_fn)[0]
    assert_ranks_agree(sent, chunks[4], "f32")
    assert_close(averaged[6], np.mean(chunks, axis=0), "f32")
    for rank in range(6):
        assert_close(averaged[rank], chunks[rank], "f32")


@pytest.mark.quick
def test_adr0012_t8_send_recv_isend_irecv_deliver_between_any_two_ranks():
    session = Session("default", ccl=ccl("ring"))
    data = [as_stored(x, "f16") for x in rank_inputs(4, (1000,), "f16")]

    def fn(torch, rank):
        dist = torch.distributed
        got = {}
        if rank == 0:
            dist.send(torch.tensor(data[0], dtype="f16"), dst=2)  # two links away on the ring
        elif rank == 2:
            inbox = torch.zeros(1000, dtype="f16")
            got["src"] = dist.recv(inbox, src=0)
            got["recv"] = inbox.numpy()
        if rank == 3:
            work = dist.isend(torch.tensor(data[3], dtype="f16"), dst=1)
            work.wait()
            got["isend_done"] = work.is_completed()
        elif rank == 1:
            inbox = torch.zeros(1000, dtype="f16")
            work = dist.irecv(inbox, src=3)
            work.wait()
            got["irecv"] = inbox.numpy()
        return got

    results = run_world(session, fn)
    assert results[2]["src"] == 0
    assert_close(results[2]["recv"], data[0], "f16")
    assert_close(results[1]["irecv"], data[3], "f16")
    assert results[3]["isend_done"] is True
    records = {record["label"]: record for record in session.ctx.collectives}
    assert set(records) == {"send#0[0->2]", "send#0[3->1]"}
    assert records["send#0[0->2]"]["ranks"] == [0, 2] and records["send#0[0->2]"]["bytes"] == 2000


@pytest.mark.quick
def test_adr0012_t9_new_group_subsets_reduce_among_their_members_only():
    session = Session("default", ccl=ccl("halving_doubling"))
    data = [as_stored(x, "f32") for x in rank_inputs(4, (77,), "f32")]

    def fn(torch, rank):
        dist = torch.distributed
        odd = dist.new_group([3, 1])  # sorted, as PyTorch does
        x = torch.tensor(data[rank], dtype="f32")
        if rank in (1, 3):
            dist.all_reduce(x, group=odd)
        facts = (dist.get_rank(odd), dist.get_world_size(odd), dist.get_process_group_ranks(odd))
        return x.numpy(), facts

    results = run_world(session, fn)
    assert_ranks_agree([results[1][0], results[3][0]], data[1] + data[3], "f32")
    for rank in (0, 2):
        assert results[rank][0].tobytes() == data[rank].astype(np.float32).tobytes()
    assert [results[r][1] for r in range(4)] == [(-1, 2, [1, 3]), (0, 2, [1, 3]), (-1, 2, [1, 3]), (1, 2, [1, 3])]
    [record] = session.ctx.collectives
    assert record["label"] == "all_reduce#0[group[1, 3]]" and record["ranks"] == [1, 3]


@pytest.mark.quick
def test_adr0012_t10_collectives_are_stream_ordered_and_async_like_nccl():
    """The call returns at once; Work.wait() blocks until done; a host read of the output waits without it."""
    session = Session("default", ccl=ccl("ring"))
    engine = session.engine
    seen = {}

    def fn(torch, rank):
        x = torch.full((4096,), float(rank + 1), dtype="f32")
        torch.ahbm.synchronize()
        called = engine.now
        work = torch.distributed.all_reduce(x, async_op=True)
        seen[rank, "returned"] = (engine.now - called, work.is_completed())
        assert work.wait() is True
        seen[rank, "waited"] = (engine.now, work.is_completed())
        y = torch.full((4096,), float(rank + 1), dtype="f32")
        assert torch.distributed.all_reduce(y) is None
        return x.numpy(), y.numpy(), engine.now

    results = run_world(session, fn)
    first, second = session.ctx.collectives
    for rank in range(4):
        assert seen[rank, "returned"] == (0, False)
        assert seen[rank, "waited"] == (first["end_ps"], True)
        x, y, read_at = results[rank]
        assert np.all(x == 10) and np.all(y == 10)
        assert read_at >= second["end_ps"] > second["start_ps"] >= first["end_ps"]

    n = 4  # PE ranks: the one worker's call is just as asynchronous
    session = Session("single_sip", ccl=ccl("tree", world_size=n))
    engine = session.engine

    def pe_fn(torch, rank):
        x = torch.tensor(np.repeat(np.arange(1.0, n + 1), 8)[None], dtype="f16", dp=over_pes(torch, n))
        torch.ahbm.synchronize()
        called = engine.now
        work = torch.distributed.all_reduce(x, async_op=True)
        returned = (engine.now - called, work.is_completed())
        work.wait()
        return returned, work.is_completed(), x.numpy()

    returned, completed, values = run_world(session, pe_fn)[0]
    assert returned == (0, False) and completed
    assert np.all(values == n * (n + 1) / 2)


def _all_reduce_then_scale(async_op: bool):
    """Each rank all-reduces x and then scales an unrelated y; (end of both, all-reduce record, x, y) per rank."""
    session = Session("default", ccl=ccl("ring"))
    engine = session.engine

    def fn(torch, rank):
        x = torch.full((1 << 20,), float(rank + 1), dtype="f32")
        y = torch.full((1 << 20,), 2.0, dtype="f32")
        torch.ahbm.synchronize()
        began = engine.now
        work = torch.distributed.all_reduce(x, async_op=async_op)
        y.mul_(3.0)  # device work that does not touch x
        if work is not None:
            work.wait()
        torch.ahbm.synchronize()
        return engine.now - began, x.numpy(), y.numpy()

    return run_world(session, fn), session.ctx.collectives[0]


def test_adr0012_t84_an_async_collective_runs_on_the_groups_stream_and_overlaps_the_next_device_work():
    """NCCL's internal stream: with async_op=True the all-reduce runs beside what the current stream does next."""
    (serial, record), (overlapped, _) = _all_reduce_then_scale(False), _all_reduce_then_scale(True)
    all_reduce_ps = record["end_ps"] - record["start_ps"]
    for rank in range(4):
        took_serial, x_serial, y_serial = serial[rank]
        took, x, y = overlapped[rank]
        assert np.array_equal(x, x_serial) and np.all(x == 10) and np.array_equal(y, y_serial)
        assert took_serial > all_reduce_ps  # in order on one stream: the scale waits for the all-reduce
        assert all_reduce_ps <= took < took_serial  # beside it: the step is shorter, never shorter than the all-reduce


def test_adr0012_t11_barrier_is_a_timed_one_element_all_reduce_after_each_ranks_device_work():
    """NCCL's barrier: a one-element all-reduce on the current stream, the host waiting for it."""
    session = Session("default", ccl=ccl("ring"))
    engine = session.engine

    def fn(torch, rank):
        if rank == 2:
            torch.zeros(1 << 20, dtype="f32")  # device work only rank 2 has
        torch.distributed.barrier()
        return engine.now

    results = run_world(session, fn)
    fill_end = max(record.end for record in session.ctx.machine.oplog if record.label.startswith("fill"))
    [row] = session.ctx.collectives
    assert (row["collective"], row["label"], row["count"], row["dtype"]) == ("barrier", "barrier#0", 1, "f32")
    assert row["start_ps"] >= fill_end > 0  # rank 2 joins once its fill is done
    assert set(results.values()) == {row["end_ps"]}  # every host returns when the all-reduce ends

    reference = Session("default", ccl=ccl("ring"))

    def one_element(torch, rank):
        x = torch.ones(1, dtype="f32")
        torch.distributed.all_reduce(x)
        return float(x.numpy()[0])

    assert set(run_world(reference, one_element).values()) == {4.0}
    [all_reduce] = reference.ctx.collectives
    assert row["time_ps"] == all_reduce["time_ps"] > 0


def test_adr0012_t12_a_pe_ranks_chunk_is_moved_by_the_pe_holding_its_first_element():
    """4 PE ranks over a tensor placed on 8 PEs: chunk r spans PEs 2r and 2r+1 and runs on PE 2r."""
    n = 4
    session = Session("single_sip", ccl=ccl("ring", world_size=n))
    data = [as_stored(x, "f32") for x in rank_inputs(n, (3, 6), "f32")]

    def fn(torch, rank):
        x = torch.tensor(np.concatenate(data, axis=1), dtype="f32",
                         dp=torch.DPPolicy(cube="column_wise", pe="column_wise", num_cubes=1, num_pes=2 * n))
        torch.distributed.all_reduce(x)
        return np.split(x.numpy(), n, axis=1)

    outputs = run_world(session, fn)[0]
    assert_ranks_agree(outputs, np.sum(data, axis=0), "f32")
    units = {record.unit for record in session.ctx.machine.oplog.select(kind="ipcq_send", label="all_reduce#0")}
    assert units == {f"cube0.pe{2 * r}.ipcq" for r in range(n)}


# ---- the run report and repeatability ------------------------------------------------------

def bus_factor(kind: str, n: int) -> float:
    """nccl-tests' doc/PERFORMANCE.md: the share of the buffer each rank's link carries."""
    return {"all_reduce": 2 * (n - 1) / n, "all_gather": (n - 1) / n, "reduce_scatter": (n - 1) / n}.get(kind, 1.0)


@pytest.mark.quick
def test_adr0012_t13_report_rows_use_nccl_tests_sizes_and_bus_bandwidth_factors():
    count, n = 3000, 4
    session = Session("default", ccl=ccl("direct"))

    def fn(torch, rank):
        dist = torch.distributed
        x = torch.ones(count, dtype="f32")
        dist.all_reduce(x)
        dist.all_gather_into_tensor(torch.empty(n * count, dtype="f32"), torch.ones(count, dtype="f32"))
        dist.reduce_scatter_tensor(torch.empty(count, dtype="f32"), torch.ones(n * count, dtype="f32"))
        dist.broadcast(x, src=0)
        dist.reduce(x, dst=3)
        if rank in (0, 1):
            (dist.send if rank == 0 else dist.recv)(x, 1 - rank)
        torch.ahbm.synchronize()

    run_world(session, fn)
    rows = session.ctx.collectives
    # The size is the per-rank buffer nccl-tests names: the gathered output, the scattered input, else the tensor.
    expected_bytes = {"all_reduce": 4 * count, "all_gather": 4 * n * count, "reduce_scatter": 4 * n * count,
                      "broadcast": 4 * count, "reduce": 4 * count, "send": 4 * count}
    assert [row["collective"] for row in rows] == list(expected_bytes)
    for row in rows:
        assert row["bytes"] == expected_bytes[row["collective"]]
        assert row["algorithm"] == "direct" and row["dtype"] == "f32"
        assert row["time_ps"] == row["end_ps"] - row["start_ps"] > 0
        assert row["algbw_gb_per_s"] == pytest.approx(row["bytes"] / (row["time_ps"] * 1e-12) / 1e9)
        factor = bus_factor(row["collective"], row["world_size"])
        assert row["busbw_gb_per_s"] == pytest.approx(row["algbw_gb_per_s"] * factor)
        assert row["world_size"] == len(row["ranks"]) == (2 if row["collective"] == "send" else n)
    report = run_report(session.ctx)
    assert report["collectives"] == rows
    text = format_report(report)
    assert "busbw" in text and all(row["label"] in text for row in rows)


@pytest.mark.quick
def test_adr0012_t14_identical_runs_give_identical_times_and_values():
    def one_run():
        session = Session("default", ccl=ccl("direct", world_size=3))
        data = rank_inputs(3, (5000,), "f32")

        def fn(torch, rank):
            x = torch.tensor(data[rank], dtype="f32")
            torch.distributed.all_reduce(x)
            y = torch.empty(3 * 5000, dtype="f32")
            torch.distributed.all_gather_into_tensor(y, x)
            return x.numpy().tobytes() + y.numpy().tobytes()

        values = run_world(session, fn)
        return [(r["label"], r["start_ps"], r["end_ps"]) for r in session.ctx.collectives], values

    first, second = one_run(), one_run()
    assert first == second
    assert len(first[0]) == 2 and all(end > start for _, start, end in first[0])


@pytest.mark.parametrize("topology, world_size, cubes", [("single_sip", 7, 1), ("default", 16, 2), ("default", 9, 3)])
def test_adr0012_t42_pe_rank_policy_gives_each_rank_its_own_pe_on_the_fewest_cubes(topology, world_size, cubes):
    session = Session(topology, ccl=ccl(world_size=world_size))
    seen = {}

    def bench(torch):
        torch.distributed.init_process_group()
        policy = torch.distributed.pe_rank_policy()
        seen["placement"] = torch.empty(2, 3 * world_size, dp=policy).placement

    session.run(bench, session.torch)
    placement = seen["placement"]
    assert len({(s.cube, s.pe) for s in placement.shards}) == world_size == len(placement.shards)
    assert len(placement.cubes()) == cubes
    assert [s.index[-1].start for s in placement.shards] == [3 * r for r in range(world_size)]


def test_adr0012_t43_a_world_no_cubes_share_evenly_is_refused_with_the_machine_named():
    with pytest.raises(PlacementError, match=r"13 PEs cannot be spread evenly over the cubes of one SIP \(4 cubes of "
                                             r"8 PEs\)"):
        DPPolicy.over_pes(13, 4, 8)


def test_adr0012_t45_workers_that_init_and_destroy_their_own_group_still_meet():
    """The PyTorch script shape: each worker inits, all-reduces, destroys; rank 2 reaches its call last."""
    session = Session("default", ccl=ccl())
    results = {}

    def worker(rank, torch):
        dist = torch.distributed
        torch.ahbm.set_device(rank)
        dist.init_process_group(backend="nccl")
        if rank == 2:
            torch.ones(1 << 16).numpy()  # host time passes: every other rank has destroyed its group by now
        x = torch.full((1, 16), rank + 1, dtype="f16")
        dist.all_reduce(x)
        dist.destroy_process_group()
        results[rank] = (x.numpy(), dist.is_initialized())

    session.run(lambda torch: torch.multiprocessing.spawn(worker, args=(torch,), nprocs=4), session.torch)
    assert sorted(results) == [0, 1, 2, 3]
    assert all((values == 10).all() for values, _ in results.values())
    assert not results[2][1], "the last rank to leave ends the world"
    assert len(session.ctx.collectives) == 1


def test_adr0012_t92_each_new_group_call_is_a_new_communicator_matched_by_its_number():
    """A worker's second `new_group` of the same ranks is a second group, the same for every worker that makes it:
    the two reduce separately (each its own collective sequence), and the first is the group a single call gives."""
    session = Session("default", ccl=ccl("ring"))

    def fn(torch, rank):
        dist = torch.distributed
        first, second = dist.new_group([0, 1]), dist.new_group([0, 1])
        x, y = torch.full((8,), float(rank + 1)), torch.full((8,), float(10 * (rank + 1)))
        if rank in (0, 1):
            dist.all_reduce(x, group=second)
            dist.all_reduce(y, group=first)
        return first is not second, dist.get_process_group_ranks(second), id(first), id(second), x.numpy(), y.numpy()

    results = run_world(session, fn)
    assert all(distinct and ranks == [0, 1] for distinct, ranks, *_ in results.values())
    assert len({(first, second) for _, _, first, second, _, _ in results.values()}) == 1  # one pair for everyone
    for rank in (0, 1):
        assert results[rank][4].tolist() == [3.0] * 8 and results[rank][5].tolist() == [30.0] * 8
    labels = sorted(record["label"] for record in session.ctx.collectives)
    assert labels == ["all_reduce#0[group[0, 1]#2]", "all_reduce#0[group[0, 1]]"]
