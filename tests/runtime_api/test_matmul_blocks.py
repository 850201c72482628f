"""ADR 0016 "Kept blocks" and "Matmul": a GEMM block is strided runs, never an index array, and a matmul program
costs a handful of events whatever K is."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kernbench.dtypes import float16, float32
from kernbench.machine.placed_dma import plan_dmas
from kernbench.machine.strided_runs import StridedRuns, gather, scatter
from kernbench.runtime_api.ops.library_gemm import GemmPlan, library_plan
from kernbench.session import Session

runs_and_range = st.tuples(st.integers(0, 50), st.integers(1, 12), st.integers(1, 9), st.integers(0, 12)).flatmap(
    lambda t: st.tuples(st.just(StridedRuns(t[0], t[2] + t[3], t[1], t[2])), st.integers(0, 200),
                        st.integers(0, 200)))


@settings(max_examples=150, deadline=None)
@given(runs_and_range)
def test_adr0016_t131_strided_runs_cut_by_a_range_are_its_elements_in_the_range_in_order(case):
    runs, first, stop = case
    indices = runs.indices()
    assert runs.size == indices.size and (runs.start, runs.stop) == (int(indices.min()), int(indices.max()) + 1)
    lanes = np.zeros(indices.size, dtype=bool)
    for piece_lanes, selector in runs.within(first, stop):
        as_array = np.arange(selector.start, selector.stop) if isinstance(selector, slice) else selector.indices()
        assert np.array_equal(indices[piece_lanes], as_array)
        assert not lanes[piece_lanes].any()
        lanes[piece_lanes] = True
    assert np.array_equal(lanes, (indices >= first) & (indices < stop))


@settings(max_examples=100, deadline=None)
@given(runs_and_range)
def test_adr0016_t131_strided_runs_gather_and_scatter_as_their_index_array_does(case):
    runs = case[0]
    flat = np.arange(runs.stop + 3, dtype=np.float32)
    got = gather(flat, runs)
    assert np.array_equal(got, flat[runs.indices()])
    flat[runs.indices()] = -1  # a gathered block is a copy: a later write does not show through it
    assert np.array_equal(got, np.arange(runs.stop + 3, dtype=np.float32)[runs.indices()])
    scatter(flat, runs, np.arange(runs.size, dtype=np.float32))
    assert np.array_equal(flat[runs.indices()], np.arange(runs.size))


def test_adr0016_t131_a_block_over_interleaved_cubes_is_the_dmas_of_its_index_array():
    """On h100 (interleaved over 4 cubes) a 96-row block of a 1000 x 300 matrix crossing a cube boundary inside
    a row: per cube the same elements, as slices and strided runs rather than index arrays."""
    session = Session("h100", timing_only=True)
    got = {}

    def bench(torch):
        x = torch.empty(1000, 300, device="cuda")
        machine, pe = session.ctx.machine, session.ctx.machine.pe(0, 0, 0)
        runs = StridedRuns(200 * 300 + 7, 300, 96, 130)
        got["runs"] = plan_dmas(machine, pe, x.allocation, runs, 4)
        got["array"] = plan_dmas(machine, pe, x.allocation, runs.indices(), 4)

    session.run(bench, session.torch)
    runs = StridedRuns(200 * 300 + 7, 300, 96, 130).indices()
    assert len(got["runs"]) > 1  # the block spans cubes
    assert [(p.memory, p.count) for p in got["runs"]] == [(p.memory, p.count) for p in got["array"]]
    for piece in got["runs"]:
        assert not isinstance(piece.selector, np.ndarray)
        elements = piece.selector.indices() if isinstance(piece.selector, StridedRuns) else \
            np.arange(piece.selector.start, piece.selector.stop)
        assert np.array_equal(elements, runs[piece.lanes])


def _matmul_dmas(k: int, transposed: bool) -> tuple[int, int, np.ndarray, np.ndarray]:
    """(matmul programs, their DMAs, the product, numpy's) of a 512 x 1024 by k x 1024 (as `w.t()` when
    `transposed`) fp16 matmul on h100."""
    session = Session("h100")
    rng = np.random.default_rng(k)
    a = rng.integers(-2, 3, (512, k)).astype(np.float16)
    b = rng.integers(-2, 3, (1024, k) if transposed else (k, 1024)).astype(np.float16)

    def bench(torch):
        x, w = torch.tensor(a, device="cuda"), torch.tensor(b, device="cuda")
        return (x @ (w.t() if transposed else w)).numpy()

    product = session.run(bench, session.torch)
    ops = session.ctx.machine.oplog.select(label="matmul")
    programs = {op.program for op in ops if op.kind == "gemm"}
    expected = a.astype(np.float32) @ (b.T if transposed else b).astype(np.float32)
    return len(programs), sum(op.kind == "dma" for op in ops), product, expected


def test_adr0016_t131_a_matmul_program_is_a_handful_of_dmas_whatever_k_and_exact():
    small, large = _matmul_dmas(128, False), _matmul_dmas(2048, False)  # both one kernel (no split of K)
    assert small[0] == large[0]
    for programs, dmas, product, expected in (small, large, _matmul_dmas(1024, True)):
        # First stage, the rest and the store, a DMA per cube each: at most 8 at K = 2048 (32 K stages).
        assert dmas <= 8 * programs
        np.testing.assert_array_equal(product.astype(np.float32), expected.astype(np.float16).astype(np.float32))


def test_adr0016_t133_the_library_plan_is_the_least_estimated_time_and_picks_what_cublas_picks_on_the_h100():
    """On h100: 256 x 128 tiles for 2048^3 and 4096^3 fp16 (one wave of 128 tiles; four of 512), and 256 x 128
    split 4 ways for 1024 x 1024 x 65536 (32 tiles would leave 100 SMs idle) — cuBLAS's choices there
    (torch.profiler on an H100: nvjet 256x128, and 256x128 splitK with a 32 x 4 grid); 256 x 128 for a float32
    8192^3, whose 64 x 64 tiles the estimate puts within `PLAN_TOLERANCE` of it (cuBLAS's 256x128 sgemm there);
    a 64 x 64 problem whose one tile is K-bound on the default machine (no launch cost) splits its K."""
    h100 = Session("h100", timing_only=True).ctx
    assert library_plan(h100, 1, 8192, 8192, 8192, float32) == GemmPlan(256, 128, 1)
    assert library_plan(h100, 1, 2048, 2048, 2048, float16) == GemmPlan(256, 128, 1)
    assert library_plan(h100, 1, 4096, 4096, 4096, float16) == GemmPlan(256, 128, 1)
    assert library_plan(h100, 1, 1024, 1024, 65536, float16) == GemmPlan(256, 128, 4)
    assert library_plan(Session("default", timing_only=True).ctx, 1, 64, 64, 4096, float16).splits > 1


def test_adr0016_t133_a_split_matmul_sums_its_partials_in_a_second_launch_and_is_exact():
    """64 x 4096 @ 4096 x 64 on the default machine: K split over programs, each storing an fp32 partial tile; a
    second launch sums them in split order (a vector pass over splits x elements) into the fp16 result: numpy's
    values, and the gemm ops' flops are the product's."""
    rng = np.random.default_rng(133)
    a = rng.integers(-2, 3, (64, 4096)).astype(np.float16)
    b = rng.integers(-2, 3, (4096, 64)).astype(np.float16)
    session = Session("default")
    got = session.run(lambda torch: (torch.tensor(a) @ torch.tensor(b)).numpy(), session.torch)
    np.testing.assert_array_equal(got, (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float16))
    plan = library_plan(session.ctx, 1, 64, 64, 4096, float16)
    ops = session.ctx.machine.oplog.select(label="matmul")
    assert sum(op.flops for op in ops if op.kind == "gemm") == 2 * 64 * 64 * 4096
    sums = [op for op in ops if op.kind == "vector"]
    assert sums and {op.args["op"] for op in sums} == {"sum_partials"}
    assert sum(op.args["elements"] for op in sums) == plan.splits * 64 * 64


def test_adr0016_t134_a_tensor_times_a_matrix_is_one_gemm_and_linear_adds_its_bias_in_the_epilogue():
    """x (4, 3, 96) @ w.T (96 -> 80) with a bias, on the default machine: F.linear is one GEMM over x's 12 rows with
    the bias added as its tiles are stored — no add of its own — and its backward is two GEMMs and a column sum:
    numpy's values and gradients. Split over K (64 x 4096 by 4096 -> 64), the bias is added in the sum of the
    partials."""
    rng = np.random.default_rng(134)
    x, w, b = (rng.integers(-2, 3, shape).astype(np.float32) for shape in ((4, 3, 96), (80, 96), (80,)))
    session = Session("default")
    got = {}

    def bench(torch):
        tx, tw, tb = (torch.tensor(v, requires_grad=True) for v in (x, w, b))
        torch.ahbm.synchronize()
        first = len(session.ctx.machine.oplog)
        y = torch.nn.functional.linear(tx, tw, tb)
        torch.ahbm.synchronize()
        got["forward"] = list(session.ctx.machine.oplog)[first:]
        (y * torch.tensor(x[..., :80])).sum().backward()
        got.update(y=y.numpy(), gx=tx.grad.numpy(), gw=tw.grad.numpy(), gb=tb.grad.numpy())

    session.run(bench, session.torch)
    g = x[..., :80]
    np.testing.assert_array_equal(got["y"], x @ w.T + b)
    np.testing.assert_array_equal(got["gx"], g @ w)
    np.testing.assert_array_equal(got["gw"], g.reshape(-1, 80).T @ x.reshape(-1, 96))
    np.testing.assert_array_equal(got["gb"], g.reshape(-1, 80).sum(0))
    assert {op.label for op in got["forward"]} == {"linear"} and not any(op.kind == "vector" for op in got["forward"])
    plan = library_plan(session.ctx, 1, 12, 80, 96, float16)
    gemms = [op for op in got["forward"] if op.kind == "gemm"]
    assert len(gemms) == -(-12 // plan.block_m) * -(-80 // plan.block_n) * plan.splits

    a, wide, bias = (rng.integers(-2, 3, shape).astype(np.float16) for shape in ((64, 4096), (64, 4096), (64,)))
    session = Session("default")
    split = session.run(lambda torch: torch.nn.functional.linear(
        torch.tensor(a), torch.tensor(wide), torch.tensor(bias)).numpy(), session.torch)
    assert library_plan(session.ctx, 1, 64, 64, 4096, float16).splits > 1
    np.testing.assert_array_equal(split, (a.astype(np.float32) @ wide.T.astype(np.float32) + bias).astype(np.float16))
