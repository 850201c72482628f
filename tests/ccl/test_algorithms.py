"""ADR 0010: every algorithm gives numpy's answer, and failures are named for the user.

Inputs are small integers (products: ±½, ±1, ±2), so every partial result is
exact in f16 and bf16 and any reduction order gives numpy's value; `avg`'s
one division rounds once, within `assert_close`'s per-dtype tolerance.
Results must also be bitwise identical on every member.
"""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest

from kernbench.ccl.collective import CollectiveError
from kernbench.ccl.algorithms.wiring import uses_wiring
from kernbench.numerics import assert_close
from kernbench.policy import DPPolicy
from kernbench.session import Session
from kernbench.sim_engine import Deadlock
from tests.ccl.harness import config, device_tensor, member, region, run, values_of

ALGORITHMS = ["ring", "tree", "direct", "halving_doubling"]
DTYPES = ["f16", "bf16", "f32"]
OPS = ["sum", "product", "min", "max", "avg"]
REFERENCE = {"sum": np.sum, "product": np.prod, "min": np.min, "max": np.max, "avg": np.mean}


def inputs(p: int, count: int, op: str, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed + 31 * p + count)
    if op == "product":
        return [rng.choice([-2.0, -1.0, -0.5, 0.5, 1.0, 2.0], count) for _ in range(p)]
    return [rng.integers(-8, 9, count).astype(np.float64) for _ in range(p)]


def assert_members_agree(outputs: list[np.ndarray], expected: np.ndarray, dtype: str) -> None:
    for output in outputs:
        assert_close(output, expected, dtype)
        assert output.tobytes() == outputs[0].tobytes()


def all_reduce_on_sips(session, algorithm, data, dtype, op, **cfg):
    tensors = [device_tensor(session, r, x, dtype) for r, x in enumerate(data)]
    run(session, "all_reduce", [member(r, r, region(t)) for r, t in enumerate(tensors)], config(algorithm, **cfg),
        op=op)
    return [values_of(t) for t in tensors]


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("p", [1, 2, 3, 4])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.quick
def test_adr0010_t6_all_reduce_matches_numpy_for_every_op_dtype_and_world_size(algorithm, p, dtype):
    for op, count in [(op, 1001) for op in OPS] + [("sum", 1)]:
        data = inputs(p, count, op)
        outputs = all_reduce_on_sips(Session("default"), algorithm, data, dtype, op)
        assert_members_agree(outputs, REFERENCE[op](np.array(data), axis=0), dtype)


@pytest.mark.parametrize("algorithm", ["ring", "direct"])
@pytest.mark.parametrize("p", [1, 2, 3, 4])
@pytest.mark.parametrize("count", [1, 333])
def test_adr0010_t7_all_gather_and_reduce_scatter_match_numpy(algorithm, p, count):
    for dtype in DTYPES:
        session = Session("default")
        data = inputs(p, count, "sum")
        sources = [device_tensor(session, r, x, dtype) for r, x in enumerate(data)]
        gathered = [session.torch.empty(p * count, dtype=dtype, device=f"ahbm:{r}") for r in range(p)]
        run(session, "all_gather", [member(r, r, region(s), region(g)) for r, (s, g) in
                                    enumerate(zip(sources, gathered))], config(algorithm), op=None)
        assert_members_agree([values_of(g) for g in gathered], np.concatenate(data), dtype)

        session = Session("default")
        data = inputs(p, p * count, "max")
        sources = [device_tensor(session, r, x, dtype) for r, x in enumerate(data)]
        scattered = [session.torch.empty(count, dtype=dtype, device=f"ahbm:{r}") for r in range(p)]
        run(session, "reduce_scatter", [member(r, r, region(s), region(o)) for r, (s, o) in
                                        enumerate(zip(sources, scattered))], config(algorithm), op="max")
        expected = np.max(np.array(data), axis=0)
        for r, out in enumerate(scattered):
            assert_close(values_of(out), expected[r * count:(r + 1) * count], dtype)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.quick
def test_adr0010_t8_broadcast_reduce_and_send_work_under_every_algorithm(algorithm):
    p, count, root = 3, 257, 2
    session = Session("default")
    data = inputs(p, count, "sum")
    tensors = [device_tensor(session, r, x, "bf16") for r, x in enumerate(data)]
    run(session, "broadcast", [member(r, r, region(t)) for r, t in enumerate(tensors)], config(algorithm),
        op=None, root=root)
    assert_members_agree([values_of(t) for t in tensors], data[root], "bf16")

    session = Session("default")
    tensors = [device_tensor(session, r, x, "f32") for r, x in enumerate(data)]
    result = session.torch.empty(count, dtype="f32", device=f"ahbm:{root}")
    untouched = values_of(tensors[0])
    members = [member(r, r, region(t), region(result) if r == root else None) for r, t in enumerate(tensors)]
    run(session, "reduce", members, config(algorithm), op="avg", root=root)
    assert_close(values_of(result), np.mean(np.array(data), axis=0), "f32")
    assert values_of(tensors[0]).tobytes() == untouched.tobytes()

    session = Session("default")
    source = device_tensor(session, 3, data[0], "f16")
    target = session.torch.empty(count, dtype="f16", device="ahbm:1")
    run(session, "send", [member(0, 3, region(source)), member(1, 1, region(target))], config(algorithm), op=None)
    assert_close(values_of(target), data[0], "f16")


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_adr0010_t9_odd_and_large_world_sizes_on_the_32_sip_switch_machine(algorithm):
    for p, dtype, op in [(7, "f32", "sum"), (8, "bf16", "avg"), (16, "f16", "max")]:
        data = inputs(p, 37, op)
        outputs = all_reduce_on_sips(Session("large"), algorithm, data, dtype, op)
        assert_members_agree(outputs, REFERENCE[op](np.array(data), axis=0), dtype)


def test_adr0010_t10_a_one_mebibyte_all_reduce_is_exact():
    count = (1 << 20) // 2
    data = inputs(4, count, "sum")
    outputs = all_reduce_on_sips(Session("default"), "ring", data, "f16", "sum", slot_size=65536, n_slots=8)
    assert_members_agree(outputs, np.sum(np.array(data), axis=0), "f16")


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("cubes, p", [(4, 4), (1, 5)])
def test_adr0010_t11_pe_members_of_one_sip_reduce_non_contiguous_shards(algorithm, cubes, p):
    """Ranks are PEs of SIP 0; member r's region is column block r of an (m, p·k) tensor, a strided set."""
    session = Session("default")
    rows, per_rank = 3, 5
    table = inputs(1, rows * p * per_rank, "sum")[0].reshape(rows, p * per_rank)
    tensor = session.torch.empty(rows, p * per_rank, dtype="f32", device="ahbm:0",
                                 dp=DPPolicy(cube="column_wise", pe="column_wise", num_cubes=cubes, num_pes=p))
    tensor._allocation.storage.typed(np.float32)[:] = table.reshape(-1)
    flat = np.arange(table.size).reshape(table.shape)
    shards = tensor._allocation.placement.shards
    members = [member(r, 0, region(tensor, flat[shard.index].reshape(-1)), cube=shard.cube, pe=shard.pe)
               for r, shard in enumerate(shards)]
    run(session, "all_reduce", members, config(algorithm), op="sum")
    total = sum(np.split(table, p, axis=1))
    np.testing.assert_array_equal(values_of(tensor).reshape(table.shape), np.tile(total, (1, p)))


def test_adr0010_t12_timing_only_times_every_op_exactly_as_with_data():
    def op_times(timing_only: bool):
        session = Session("default")
        data = inputs(3, 5000, "sum")
        tensors = [device_tensor(session, r, x, "bf16") for r, x in enumerate(data)]
        run(session, "all_reduce", [member(r, r, region(t)) for r, t in enumerate(tensors)], config("ring"),
            timing_only=timing_only)
        return [(r.kind, r.device, r.unit, r.nbytes, r.start, r.end) for r in session.ctx.machine.oplog.select()]

    assert op_times(True) == op_times(False)


@pytest.fixture
def user_module(monkeypatch):
    """A user's own algorithm module, importable by name, as ccl.yaml would name it."""
    module = types.ModuleType("my_ccl_algorithm")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    return module


def user_config(module, wiring="full") -> dict:
    return {**config("direct"), "algorithm": "mine", "module": module.__name__, "wiring": wiring}


def test_adr0010_t14_a_receive_nobody_sends_to_is_a_deadlock_naming_the_pe_and_the_collective(user_module):
    def all_reduce(ctx, request):
        if ctx.rank == 1:
            ctx.recv(0)  # rank 0 forgets to send

    user_module.all_reduce = all_reduce
    session = Session("default")
    tensors = [session.torch.empty(4, dtype="f32", device=f"ahbm:{r}") for r in range(2)]
    with pytest.raises(Deadlock) as error:
        run(session, "all_reduce", [member(r, r, region(t)) for r, t in enumerate(tensors)],
            user_config(user_module), label="all_reduce#7 mine")
    message = str(error.value)
    assert "process 'all_reduce#7 mine rank 1 on sip1.cube0.pe0'" in message
    assert "recv on sip1.cube0.pe0 from sip0.cube0.pe0 (all_reduce#7 mine)" in message


def test_adr0010_t15_a_user_module_with_its_own_wiring_runs_with_no_framework_change(user_module):
    def star(size):
        return {pair for r in range(1, size) for pair in ((r, 0), (0, r))}

    def all_reduce(ctx, request):
        me = ctx.member
        own = ctx.load(me.input, 0, me.input.count)
        if ctx.rank:
            ctx.send(0, own)
            ctx.store(me.output, 0, me.input.count, ctx.recv(0))
            return
        for peer in range(1, ctx.size):
            own = ctx.reduce(request.reduce_op, own, ctx.recv(peer))
        for peer in range(1, ctx.size):
            ctx.send(peer, own)
        ctx.store(me.output, 0, me.input.count, own)

    user_module.WIRINGS = {"star": star}
    user_module.all_reduce = all_reduce
    data = inputs(3, 100, "sum")
    session = Session("default")
    tensors = [device_tensor(session, r, x, "f32") for r, x in enumerate(data)]
    run(session, "all_reduce", [member(r, r, region(t)) for r, t in enumerate(tensors)],
        user_config(user_module, wiring="star"))
    assert_members_agree([values_of(t) for t in tensors], np.sum(np.array(data), axis=0), "f32")


def test_adr0010_t16_sends_outside_the_wiring_or_never_received_are_named(user_module):
    def all_reduce(ctx, request):
        if ctx.rank == 0:
            ctx.send(2, ctx.load(ctx.member.input, 0, 1))

    user_module.all_reduce = all_reduce
    session = Session("default")
    tensors = [session.torch.empty(4, dtype="f32", device=f"ahbm:{r}") for r in range(4)]
    members = [member(r, r, region(t)) for r, t in enumerate(tensors)]
    with pytest.raises(CollectiveError, match="rank 0 has no IPCQ to rank 2 under wiring 'ring_1d'"):
        run(session, "all_reduce", members, user_config(user_module, wiring="ring_1d"))
    with pytest.raises(CollectiveError, match=r"never received \(rank 0 -> rank 2: 1 chunk"):
        run(session, "all_reduce", members, user_config(user_module, wiring="full"))


def test_adr0010_t17_schedules_that_need_other_queues_declare_their_own_wiring():
    """send everywhere, direct's star-shaped broadcast and reduce, and the tree's rooted trees (rotated, so not
    the binary_tree rooted at rank 0) run on `full`; the ring's chains use the ring's own queues."""
    from kernbench.ccl.algorithms import direct, halving_doubling, ring, tree

    for module in (ring, tree, direct, halving_doubling):
        assert module.send.ccl_wiring == "full"
    for kind in ("broadcast", "reduce"):
        assert getattr(direct, kind).ccl_wiring == getattr(tree, kind).ccl_wiring == "full"
        assert not hasattr(getattr(ring, kind), "ccl_wiring")
    assert uses_wiring("star")(lambda ctx, request: None).ccl_wiring == "star"
