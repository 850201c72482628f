"""ADR 0010, "Every collective under every algorithm": every kind runs under every shipped algorithm (natively or
through its fallback) and gives numpy's answer, with the new kinds' region conventions and reduce ops.

Inputs are small integers, so every order of reduction is exact in f16 and
the result must equal numpy's bit for bit, on every member that holds it.
"""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass

import numpy as np
import pytest

from kernbench.ccl import collective
from kernbench.ccl.collective import FALLBACK, KINDS, REDUCE_OPS, CollectiveError
from kernbench.policy import DPPolicy
from kernbench.session import Session
from tests.ccl.harness import config, device_tensor, member, region, run, run_schedule, values_of

ALGORITHMS = ["ring", "tree", "direct", "halving_doubling"]
# (group size, dtype, elements per rank's piece): 1 element, an odd count, and several 1024-element f32 slots.
SHAPES = [(1, "f32", 5), (2, "i32", 1), (3, "f16", 333), (4, "f32", 2600), (5, "i32", 333)]
NATIVE = {
    "ring": {"all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "send"},
    "tree": {"all_reduce", "broadcast", "reduce", "send"},
    "direct": set(KINDS),
    "halving_doubling": {"all_reduce", "all_gather", "reduce_scatter", "send"},
}


def runs_natively(algorithm: str, kind: str, p: int) -> bool:
    """Halving-doubling's reduce_scatter and all_gather need a power-of-two group (its all_reduce folds)."""
    power_of_two = p & (p - 1) == 0
    return kind in NATIVE[algorithm] and (power_of_two or (algorithm, kind) not in HALVING_ONLY)


HALVING_ONLY = {("halving_doubling", "all_gather"), ("halving_doubling", "reduce_scatter")}


@dataclass
class Case:
    """One collective's data: each rank's input, its output size (None: in place), and what each output holds
    afterwards (None: left as it was)."""

    inputs: list
    output_sizes: list
    expected: list
    root: int | None = None
    op: str | None = None
    splits: tuple | None = None


def small_ints(rng, count: int) -> np.ndarray:
    return rng.integers(-8, 9, count).astype(np.float64)


def make_case(kind: str, p: int, c: int, seed: int = 0, splits=None, root: int | None = None) -> Case:
    """Inputs, output sizes and numpy's answer for `kind` over p ranks of c-element pieces; root p − 1 unless
    given. A rooted kind's non-root output is its input region, as the caller passes it."""
    rng = np.random.default_rng(seed + 7 * p + c)
    root = p - 1 if root is None else root
    at_root = [r == root for r in range(p)]
    if kind == "all_to_all":
        splits = splits or tuple(tuple([c] * p) for _ in range(p))
        data = [small_ints(rng, sum(row)) for row in splits]
        cuts = [np.split(x, np.cumsum(row)[:-1]) for x, row in zip(data, splits)]
        return Case(data, [sum(row[k] for row in splits) for k in range(p)],
                    [np.concatenate([cuts[r][k] for r in range(p)]) for k in range(p)], splits=splits)
    data = [small_ints(rng, p * c if kind in ("reduce_scatter", "scatter") else c) for _ in range(p)]
    total = np.sum(data, axis=0)
    cases = {
        "all_reduce": lambda: Case(data, [None] * p, [total] * p, op="sum"),
        "broadcast": lambda: Case(data, [None] * p, [data[root]] * p, root=root),
        "reduce": lambda: Case(data, [c if r else None for r in at_root], [total if r else None for r in at_root],
                               root=root, op="sum"),
        "all_gather": lambda: Case(data, [p * c] * p, [np.concatenate(data)] * p),
        "reduce_scatter": lambda: Case(data, [c] * p, np.split(total, p), op="sum"),
        "scatter": lambda: Case(data, [c] * p, np.split(data[root], p), root=root),
        "gather": lambda: Case(data, [p * c if r else None for r in at_root],
                               [np.concatenate(data) if r else None for r in at_root], root=root),
        "send": lambda: Case(data[:2], [None, c], [None, data[0]]),
    }
    return cases[kind]()


def run_case(session: Session, kind: str, case: Case, cfg: dict, dtype: str, **request):
    """Run `case` with rank r on SIP r; return (each rank's output values, its input values before, algorithm)."""
    sources = [device_tensor(session, r, x, dtype) for r, x in enumerate(case.inputs)]
    targets = [s if size is None else session.torch.empty(size, dtype=dtype, device=f"ahbm:{r}")
               for r, (s, size) in enumerate(zip(sources, case.output_sizes))]
    before = [values_of(t) for t in targets]
    members = [member(r, r, region(s), None if t is s else region(t)) for r, (s, t) in enumerate(zip(sources, targets))]
    _, algorithm = run_schedule(session, kind, members, cfg, op=case.op, root=case.root, splits=case.splits,
                                **request)
    return [values_of(t) for t in targets], before, algorithm


def assert_case(outputs, before, case: Case, dtype: str) -> None:
    for rank, (output, old, want) in enumerate(zip(outputs, before, case.expected)):
        want = old if want is None else np.asarray(want).astype(output.dtype)
        assert output.tobytes() == want.tobytes(), f"rank {rank}"


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_adr0010_t30_every_kind_matches_numpy_under_every_algorithm(algorithm, kind):
    for p, dtype, count in SHAPES:
        if kind == "send" and p != 2:
            continue
        case = make_case(kind, p, count)
        topology = "large" if p > 4 else "default"
        outputs, before, ran = run_case(Session(topology), kind, case, config(algorithm), dtype)
        assert_case(outputs, before, case, dtype)
        assert ran == (algorithm if runs_natively(algorithm, kind, p) else FALLBACK[kind])


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_adr0010_t30_power_of_two_groups_of_eight_run_every_kind(algorithm):
    """p = 8 on the 32-SIP switch machine: halving-doubling's three halving steps, the tree's third level."""
    for kind in ("all_gather", "reduce_scatter", "broadcast", "reduce", "all_to_all"):
        case = make_case(kind, 8, 37)
        outputs, before, _ = run_case(Session("large"), kind, case, config(algorithm), "f32")
        assert_case(outputs, before, case, "f32")


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_adr0010_t30_pe_ranks_of_one_sip_scatter_gather_and_trade_strided_shards(algorithm):
    """Members are PEs of SIP 0 (the PE-rank layout); each region is a strided column block of one tensor."""
    p, rows, per_rank = 4, 3, 4
    session = Session("default")
    tensor = session.torch.empty(rows, p * per_rank, dtype="f32", device="ahbm:0",
                                 dp=DPPolicy(cube="column_wise", pe="column_wise", num_cubes=4, num_pes=p))
    table = small_ints(np.random.default_rng(3), rows * p * per_rank).reshape(rows, p * per_rank)
    tensor._allocation.storage.typed(np.float32)[:] = table.reshape(-1)
    flat = np.arange(table.size).reshape(table.shape)
    shards = tensor._allocation.placement.shards
    blocks = [table[shard.index].reshape(-1) for shard in shards]
    members = [member(r, 0, region(tensor, flat[shard.index].reshape(-1)), cube=shard.cube, pe=shard.pe)
               for r, shard in enumerate(shards)]
    run(session, "all_to_all", members, config(algorithm), op=None)
    pieces = [np.split(block, p) for block in blocks]
    expected = [np.concatenate([pieces[r][k] for r in range(p)]) for k in range(p)]
    result = values_of(tensor).reshape(table.shape)
    for k, shard in enumerate(shards):
        np.testing.assert_array_equal(result[shard.index].reshape(-1), expected[k])
    run(session, "broadcast", members, config(algorithm), op=None, root=2)
    for shard in shards:
        np.testing.assert_array_equal(values_of(tensor).reshape(table.shape)[shard.index].reshape(-1), expected[2])


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_adr0010_t31_a_kind_the_algorithm_lacks_runs_its_fallback_with_the_fallbacks_wiring(algorithm):
    """tree's all_gather runs the ring under ring_1d, which binary_tree lacks (1 → 2 is no tree edge at p = 4)."""
    case = make_case("all_gather", 4, 10)
    outputs, before, ran = run_case(Session("default"), "all_gather", case, config(algorithm), "f32")
    assert_case(outputs, before, case, "f32")
    assert ran == ("ring" if algorithm == "tree" else algorithm)
    case = make_case("scatter", 4, 10)
    assert run_case(Session("default"), "scatter", case, config(algorithm), "f32")[2] == "direct"


def test_adr0010_t31_halving_doubling_falls_back_where_the_group_is_not_a_power_of_two():
    for p, ran in [(3, "ring"), (4, "halving_doubling")]:
        case = make_case("reduce_scatter", p, 7)
        outputs, before, algorithm = run_case(Session("default"), "reduce_scatter", case,
                                              config("halving_doubling"), "i32")
        assert_case(outputs, before, case, "i32")
        assert algorithm == ran


def test_adr0010_t32_a_user_module_lacking_a_kind_falls_back_too(monkeypatch):
    """The user's wiring 'star' is no shipped wiring: the ring's chain runs on ring_1d, not on it."""
    module = types.ModuleType("my_ccl_reducer_only")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    module.all_reduce = lambda ctx, request: None
    cfg = {**config("direct"), "algorithm": "mine", "module": module.__name__, "wiring": "star"}
    case = make_case("broadcast", 3, 50)
    outputs, before, ran = run_case(Session("default"), "broadcast", case, cfg, "f16")
    assert_case(outputs, before, case, "f16")
    assert ran == "ring"


def test_adr0010_t13_a_kind_nothing_runs_names_the_algorithm_and_those_that_run_it(monkeypatch):
    """With halving-doubling as all_gather's fallback, a tree all_gather of 3 ranks has nothing to run."""
    monkeypatch.setitem(collective.FALLBACK, "all_gather", "halving_doubling")
    case = make_case("all_gather", 3, 4)
    with pytest.raises(CollectiveError) as error:
        run_case(Session("default"), "all_gather", case, config("tree"), "f32")
    message = str(error.value)
    assert "'tree'" in message and "'halving_doubling'" in message and "all_gather for a group of 3" in message
    assert message.endswith("shipped algorithms that do: direct, ring")


BITWISE = {"band": np.bitwise_and, "bor": np.bitwise_or, "bxor": np.bitwise_xor}


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("op", list(BITWISE))
def test_adr0010_t33_bitwise_ops_reduce_integers_and_bools(algorithm, op):
    reference = BITWISE[op].reduce
    for p, dtype, count in [(3, "i32", 333), (4, "u8", 1), (4, "bool", 77), (2, "i16", 2100)]:
        rng = np.random.default_rng(p + count)
        data = [rng.integers(0, 256, count) % (2 if dtype == "bool" else 256) for _ in range(p)]
        session = Session("default")
        tensors = [device_tensor(session, r, x, dtype) for r, x in enumerate(data)]
        run(session, "all_reduce", [member(r, r, region(t)) for r, t in enumerate(tensors)], config(algorithm),
            op=op)
        want = reference(np.array(data).astype(tensors[0].dtype.numpy), axis=0)
        for tensor in tensors:
            assert values_of(tensor).tobytes() == want.tobytes()
        case = make_case("reduce_scatter", p, count)
        case.inputs = [np.abs(x).astype(np.int64) for x in case.inputs]
        case.op = op
        case.expected = np.split(reference(np.array(case.inputs).astype(np.int32), axis=0), p)
        outputs, before, _ = run_case(Session("default"), "reduce_scatter", case, config(algorithm), "i32")
        assert_case(outputs, before, case, "i32")


@pytest.mark.parametrize("op", list(BITWISE))
@pytest.mark.parametrize("dtype", ["f16", "bf16", "f32"])
def test_adr0010_t34_bitwise_ops_refuse_floating_data_naming_op_and_dtype(op, dtype):
    session = Session("default")
    tensors = [session.torch.empty(4, dtype=dtype, device=f"ahbm:{r}") for r in range(2)]
    with pytest.raises(CollectiveError) as error:
        run(session, "all_reduce", [member(r, r, region(t)) for r, t in enumerate(tensors)], config("ring"), op=op)
    assert str(error.value) == f"test#1: reduce op {op!r} is bitwise and takes integer or bool data, not {dtype}"


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_adr0010_t35_premul_sum_is_the_sum_times_the_factor(algorithm):
    """The sum of small integers times ½ or 3 is exact, so scaling the sum equals NCCL's scaled inputs summed."""
    for kind, p, dtype, factor in [("all_reduce", 3, "f16", 0.5), ("reduce", 4, "f32", 3.0),
                                   ("reduce_scatter", 4, "i32", 3), ("all_reduce", 1, "f32", 0.5),
                                   ("reduce", 1, "f16", 3.0)]:
        case = make_case(kind, p, 300)
        case.op = "premul_sum"
        case.expected = [None if x is None else np.asarray(x) * factor for x in case.expected]
        outputs, before, _ = run_case(Session("default"), kind, case, config(algorithm), dtype, premul_factor=factor)
        assert_case(outputs, before, case, dtype)


@pytest.mark.parametrize("premul_factor, dtype, problem", [
    (None, "f32", "premul_sum needs a numeric premul_factor, got None"),
    (0.5, "i32", "premul_sum factor 0.5 is not a whole number, which i32 data cannot be multiplied by"),
])
def test_adr0010_t35_premul_sum_needs_a_factor_the_dtype_can_hold(premul_factor, dtype, problem):
    session = Session("default")
    tensors = [session.torch.empty(4, dtype=dtype, device=f"ahbm:{r}") for r in range(2)]
    with pytest.raises(CollectiveError, match=f"^test#1: {problem}$"):
        run(session, "all_reduce", [member(r, r, region(t)) for r, t in enumerate(tensors)], config("ring"),
            op="premul_sum", premul_factor=premul_factor)


def test_adr0010_t35_reduce_ops_list_every_op():
    assert REDUCE_OPS == ("sum", "product", "min", "max", "avg", "band", "bor", "bxor", "premul_sum")


SPLITS = [
    ((0, 3, 5), (2, 0, 1), (4, 4, 0)),  # nobody keeps anything, some pairs send nothing
    ((1500, 0, 7), (0, 0, 0), (1, 2600, 3)),  # several slots to one rank, a rank sending nothing at all
]


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("splits", SPLITS, ids=["small", "uneven"])
def test_adr0010_t36_all_to_all_with_unequal_and_zero_splits_matches_numpy(algorithm, splits):
    case = make_case("all_to_all", 3, 0, splits=splits)
    outputs, before, ran = run_case(Session("default"), "all_to_all", case, config(algorithm), "f32")
    assert_case(outputs, before, case, "f32")
    assert ran == "direct"


@pytest.mark.parametrize("kind", ["scatter", "gather", "broadcast", "reduce"])
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_adr0010_t37_rooted_kinds_honour_every_root(algorithm, kind):
    for root in range(4):
        case = make_case(kind, 4, 129, seed=root, root=root)
        outputs, before, _ = run_case(Session("default"), kind, case, config(algorithm), "f16")
        assert_case(outputs, before, case, "f16")


@pytest.mark.parametrize("kind, inputs, outputs, splits, problem", [
    ("scatter", [5, 5, 10], [5, 5, 5], None, "scatter root input of 10 elements does not split over 3"),
    ("scatter", [5, 5, 15], [5, 4, 5], None, "scatter of 15 input elements needs an output of 5 on rank 1, got 4"),
    ("gather", [5, 5, 5], [5, 5, 14], None, "gather of 5 input elements needs an output of 15 on rank 2, got 14"),
    ("gather", [5, 4, 5], [5, 4, 15], None, r"members' inputs differ in size \(\[4, 5\] elements\)"),
    ("all_to_all", [7, 7, 7], [7, 7, 7], None, "all_to_all input of 7 elements does not split over 3"),
    ("all_to_all", [6, 6, 6], [6, 6, 3], None, "all_to_all of 6 input elements needs an output of 6 on rank 2, got 3"),
    ("all_to_all", [3, 3, 3], [3, 3, 3], ((1, 1, 1), (1, 1, 1)), "all_to_all splits must be 3 rows of 3 non-neg"),
    ("all_to_all", [3, 3, 3], [3, 3, 3], ((1, 1, 1), (1, -1, 3), (1, 1, 1)), "all_to_all splits must be 3 rows of 3"),
    ("all_to_all", [3, 4, 3], [3, 3, 3], ((1, 1, 1),) * 3,
     r"all_to_all splits\[1\] sends 3 elements but rank 1's input has 4"),
    ("all_to_all", [3, 3, 3], [3, 3, 4], ((1, 1, 1),) * 3,
     "all_to_all splits bring 3 elements to rank 2 but its output has 4"),
])
def test_adr0010_t38_region_conventions_are_checked_naming_the_rank(kind, inputs, outputs, splits, problem):
    session = Session("default")
    members = []
    for r, (a, b) in enumerate(zip(inputs, outputs)):
        source = session.torch.empty(a, dtype="f32", device=f"ahbm:{r}")
        members.append(member(r, r, region(source), region(session.torch.empty(b, dtype="f32", device=f"ahbm:{r}"))))
    with pytest.raises(CollectiveError, match=f"^test#1: {problem}"):
        run(session, kind, members, config("direct"), op=None, root=2 if kind in ("scatter", "gather") else None,
            splits=splits)


def test_adr0010_t38_splits_and_premul_factor_only_where_they_mean_something():
    session = Session("default")
    tensors = [session.torch.empty(4, dtype="f32", device=f"ahbm:{r}") for r in range(2)]
    members = [member(r, r, region(t)) for r, t in enumerate(tensors)]
    with pytest.raises(CollectiveError, match="^test#1: splits are for all_to_all, not all_reduce$"):
        run(session, "all_reduce", members, config("ring"), splits=((2, 2), (2, 2)))
    with pytest.raises(CollectiveError, match="^test#1: premul_factor is for the premul_sum reduce op, not all_reduce"):
        run(session, "all_reduce", members, config("ring"), premul_factor=2.0)


@pytest.mark.parametrize("algorithm, kind", [("ring", "broadcast"), ("ring", "reduce"), ("tree", "broadcast"),
                                             ("tree", "reduce"), ("halving_doubling", "all_gather"),
                                             ("halving_doubling", "reduce_scatter"), ("direct", "scatter"),
                                             ("direct", "gather"), ("direct", "all_to_all")])
def test_adr0010_t39_timing_only_times_the_new_schedules_exactly_as_with_data(algorithm, kind):
    def op_times(timing_only: bool):
        session = Session("default")
        case = make_case(kind, 4, 3000)
        run_case(session, kind, case, config(algorithm), "f32", timing_only=timing_only)
        return [(r.kind, r.device, r.unit, r.nbytes, r.start, r.end) for r in session.ctx.machine.oplog.select()]

    assert op_times(True) == op_times(False)
