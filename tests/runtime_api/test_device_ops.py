"""ADR 0016: torch's operators, reductions and matmul as device work, checked against numpy and closed forms."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernbench.dtypes import resolve_dtype
from kernbench.machine.pe import gemm_ps, vector_ps
from kernbench.numerics import assert_close
from kernbench.runtime_api.ops import device_ops, library_gemm, reductions, table
from kernbench.runtime_api.ops.device_ops import storage_indices
from kernbench.runtime_api.errors import TensorError
from kernbench.runtime_api.layout.views import Layout
from kernbench.session import Session
from tests.runtime_api.closed_forms import dma_ps
from tests.runtime_api.op_rows import BINARY, UNARY

# Inputs each unary row is defined on (positive where a log or root needs it).
POSITIVE = {"log", "log2", "log10", "sqrt", "rsqrt", "reciprocal", "log1p"}
INTEGRAL = {"bitwise_not", "bitwise_and", "bitwise_or", "bitwise_xor"}


def _run(fn, timing_only: bool = False):
    session = Session("default", timing_only=timing_only)
    out = {}
    session.run(lambda torch: out.update(value=fn(torch)), session.torch)
    return session, out["value"]


def _values(rng, shape, dtype: str, positive: bool = False):
    if dtype in ("i32", "i64"):
        return rng.integers(1, 9, shape).astype(resolve_dtype(dtype).numpy)
    values = rng.uniform(0.5 if positive else -2.0, 2.0, shape)
    return values.astype(resolve_dtype(dtype).numpy)


@pytest.mark.parametrize("name", sorted(set(UNARY) - INTEGRAL - {"logical_not"}))
@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.quick
def test_adr0016_t1_each_unary_row_matches_numpy(name, dtype):
    rng = np.random.default_rng(1)
    values = _values(rng, (3, 70), dtype, positive=name in POSITIVE)
    _, result = _run(lambda torch: getattr(torch.tensor(values, dtype=dtype), name)().numpy())
    fn = UNARY[name].numpy
    expected = fn(values.astype(np.float64))
    kind = resolve_dtype(dtype).name if result.dtype != np.bool_ else "bool"
    assert_close(result, expected, kind)


@pytest.mark.parametrize("name", sorted(set(BINARY) - INTEGRAL))
@pytest.mark.parametrize("shapes", [((4, 5), (4, 5)), ((4, 5), (5,)), ((3, 1, 5), (4, 1)), ((), (2, 3))])
@pytest.mark.quick
def test_adr0016_t2_each_binary_row_broadcasts_as_numpy(name, shapes):
    rng = np.random.default_rng(2)
    a, b = (_values(rng, shape, "f32", positive=True) for shape in shapes)
    _, result = _run(lambda torch: getattr(torch.tensor(a), name)(torch.tensor(b)).numpy())
    fn = BINARY[name].numpy
    expected = fn(a.astype(np.float64), b.astype(np.float64))
    assert result.shape == np.broadcast_shapes(a.shape, b.shape)
    assert_close(result, expected, "f32" if result.dtype != np.bool_ else "bool")


@pytest.mark.parametrize("left, right, expected", [
    (("f16", (3,)), 1.5, "f16"),           # a number never widens a tensor of its category
    (("i32", (3,)), 1.5, "f32"),           # a float number over integers: the default float
    (("i32", (3,)), ("f16", ()), "f16"),   # a zero-dim tensor of a higher category decides
    (("f32", (3,)), ("f64", ()), "f32"),   # ... but not within the same category
    (("i64", (3,)), ("f16", (3,)), "f16"),  # integer meets float: the float type (numpy would say f64)
    (("f16", (3,)), ("bf16", (3,)), "f32"),
    (("bool", (3,)), 2, "i64"),
    (("u8", (3,)), ("i8", (3,)), "i16"),
])
@pytest.mark.quick
def test_adr0016_t3_type_promotion_is_torchs(left, right, expected):
    def operand(torch, spec):
        if not isinstance(spec, tuple):
            return spec
        dtype, shape = spec
        return torch.ones(shape, dtype=dtype)

    _, dtype = _run(lambda torch: (operand(torch, left) + operand(torch, right)).dtype)
    assert dtype.name == expected


@pytest.mark.parametrize("op", ["sum", "mean", "amax", "amin", "argmax", "argmin", "prod"])
@pytest.mark.parametrize("dim, keepdim", [(None, False), (0, False), (1, True), ((0, 2), False), (-1, True)])
def test_adr0016_t4_reductions_match_numpy_over_any_dims(op, dim, keepdim):
    rng = np.random.default_rng(4)
    values = rng.uniform(0.5, 1.5, (3, 5, 7)).astype(np.float32)
    if op in ("argmax", "argmin") and isinstance(dim, tuple):
        return  # torch's argmax takes one dim
    _, result = _run(lambda torch: getattr(torch.tensor(values), op)(dim, keepdim).numpy())
    reference = {"sum": np.sum, "mean": np.mean, "amax": np.max, "amin": np.min, "prod": np.prod,
                 "argmax": np.argmax, "argmin": np.argmin}[op]
    if op in ("argmax", "argmin"):
        expected = reference(values, axis=dim, keepdims=keepdim) if dim is not None else reference(values)
        assert np.array_equal(result, expected)
    else:
        assert_close(result, reference(values.astype(np.float64), axis=dim, keepdims=keepdim), "f32")


@pytest.mark.quick
def test_adr0016_t5_a_reduction_larger_than_a_tile_is_chunked_and_exact():
    """Sum and argmax of 2^20 elements: more than one TCM tile per output, merged across chunks."""
    values = np.random.default_rng(5).uniform(-1, 1, 1 << 20).astype(np.float32)
    values[777_777] = 5.0
    session, (total, where) = _run(lambda torch: (torch.tensor(values).sum().item(),
                                                  torch.tensor(values).argmax().item()))
    assert_close(total, values.astype(np.float64).sum(), "f32")
    assert where == 777_777
    steps = [op for op in session.ctx.machine.oplog.select(label="sum") if op.kind == "vector"]
    assert len(steps) > 1


@pytest.mark.parametrize("shape, dim", [((1 << 20,), None), ((4, 1 << 19), 1), ((3, 2, 1 << 19), 2)])
@pytest.mark.parametrize("op", ["sum", "mean", "amax", "argmax", "all"])
def test_adr0016_t125_a_reduction_with_few_outputs_is_split_over_the_pes_and_exact(shape, dim, op):
    """Too few outputs to give every PE a program: the reduced extent is split over the SIP's PEs
    (`reduction_splits` parts of at least `PART_CHUNKS` chunks, each part's partial stored in a workspace), then
    a second launch merges the partials in part order — the values are numpy's (argmax: the first index of the
    maximum, here planted in the last part and tied in the first)."""
    values = np.random.default_rng(125).uniform(-1, 1, shape).astype(np.float32)
    flat = values.reshape(-1)
    flat[-3] = flat[5] = 7.0  # a tie across parts: argmax must keep the earlier one

    def bench(torch):
        x = torch.tensor(values, device="cuda")
        reduced = getattr(x, op)() if dim is None else getattr(x, op)(dim)
        return reduced.numpy()

    session, result = _run(bench)
    reference = {"sum": np.sum, "mean": np.mean, "amax": np.max, "argmax": np.argmax, "all": np.all}[op]
    if op in ("argmax", "all"):
        assert np.array_equal(result, reference(values, axis=dim))
    else:
        assert_close(result, reference(values.astype(np.float64), axis=dim), "f32")
    ctx = session.ctx
    reduced = values.size if dim is None else shape[dim]
    outputs = values.size // reduced
    tile = device_ops.tile_elements(ctx, values.dtype.itemsize)
    chunk = min(reduced, tile)
    groups = -(-outputs // device_ops.streamed(ctx, outputs, max(1, tile // reduced)))
    splits = device_ops.reduction_splits(ctx, groups, reduced, chunk)
    assert splits == min(-(-ctx.topology.pes_per_sip // groups), reduced // (device_ops.PART_CHUNKS * chunk)) > 1
    first_pass = {op_.program for op_ in ctx.machine.oplog.select(label=op) if op_.kind == "vector"
                  and op_.args["elements"] != splits * outputs}
    assert len(first_pass) == groups * splits


def test_adr0016_t126_a_split_reduction_times_the_same_without_values():
    """The split and the merge issue the same PE ops with and without values (timing-only)."""
    def bench(torch):
        x = torch.randn(1 << 20, device="cuda")
        torch.ahbm.synchronize()
        x.sum(), x.argmax(), x.reshape(8, -1).mean(1)
        torch.ahbm.synchronize()

    ends = []
    for timing_only in (False, True):
        session, _ = _run(bench, timing_only=timing_only)
        ends.append((session.engine.now, len(session.ctx.machine.oplog)))
    assert ends[0] == ends[1]


@pytest.mark.parametrize("shapes", [((8, 16), (16, 4)), ((70, 33), (33, 65)), ((16,), (16, 8)), ((8, 16), (16,)),
                                    ((16,), (16,)), ((2, 3, 8, 16), (16, 4)), ((3, 8, 16), (1, 16, 5))])
@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_adr0016_t6_matmul_matches_numpy_in_every_torch_form(shapes, dtype):
    rng = np.random.default_rng(6)
    a, b = (rng.uniform(-1, 1, shape).astype(resolve_dtype(dtype).numpy) for shape in shapes)
    _, result = _run(lambda torch: (torch.tensor(a, dtype=dtype) @ torch.tensor(b, dtype=dtype)).numpy())
    assert_close(result, np.matmul(a.astype(np.float64), b.astype(np.float64)), dtype)


@pytest.mark.quick
def test_adr0016_t7_an_elementwise_op_takes_its_closed_form_on_an_idle_machine():
    """One tile on one PE: load x, load y, one vector pass, store — each a DMA through the PE's engine."""
    n = 4096
    session = Session("default")

    def bench(torch):
        x, y = torch.ones(n), torch.ones(n)
        torch.ahbm.synchronize()
        (x + y).numpy()

    session.run(bench, session.torch)
    topology = session.ctx.topology
    ops = session.ctx.machine.oplog.select(label="add")
    one_dma = dma_ps(topology, n * 4, data_cube=0, pe_cube=0)
    assert [op.kind for op in ops] == ["dma", "dma", "vector", "dma"]
    assert ops[-1].end - ops[0].start == 3 * one_dma + vector_ps(topology, n)


@pytest.mark.quick
def test_adr0016_t8_a_matmul_block_is_its_flops_over_the_matrix_unit():
    session, _ = _run(lambda torch: (torch.ones(64, 32, dtype="f16") @ torch.ones(32, 64, dtype="f16")).numpy())
    gemms = [op for op in session.ctx.machine.oplog.select(label="matmul") if op.kind == "gemm"]
    flops = 2 * 64 * 64 * 32
    assert [op.flops for op in gemms] == [flops]
    assert gemms[0].end - gemms[0].start == gemm_ps(session.ctx.topology, "f16", flops)


@pytest.mark.quick
def test_adr0016_t9_ops_are_enqueued_and_timing_only_takes_the_same_time():
    def bench(torch):
        x = torch.ones(1 << 16)
        y = (x * 3).exp().sum(0)
        torch.ahbm.synchronize()
        return y

    with_data, _ = _run(bench)
    timing, _ = _run(bench, timing_only=True)
    assert with_data.ctx.engine.now == timing.ctx.engine.now > 0
    assert [(op.kind, op.start, op.end) for op in with_data.ctx.machine.oplog] == \
        [(op.kind, op.start, op.end) for op in timing.ctx.machine.oplog]


@pytest.mark.quick
def test_adr0016_t10_composites_match_numpy():
    rng = np.random.default_rng(10)
    x = rng.normal(size=(6, 32)).astype(np.float32)
    w = rng.normal(size=(32,)).astype(np.float32)

    def bench(torch):
        t = torch.tensor(x)
        F = torch.nn.functional
        return {name: fn(t).numpy() for name, fn in {
            "softmax": lambda t: F.softmax(t, dim=-1), "log_softmax": lambda t: F.log_softmax(t, dim=1),
            "layer_norm": lambda t: F.layer_norm(t, (32,), torch.tensor(w)),
            "rms_norm": lambda t: F.rms_norm(t, (32,), eps=1e-6), "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"),
            "var": lambda t: t.var(1), "std": lambda t: t.std(), "norm": lambda t: t.norm(),
            "where": lambda t: torch.where(t > 0, t, 0.0), "clamp": lambda t: t.clamp(-0.5, 0.5),
            "masked_fill": lambda t: t.masked_fill(t < 0, -1.0),
            "cat": lambda t: torch.cat([t, t[:2]]), "stack": lambda t: torch.stack([t, t], dim=1),
        }.items()}

    _, got = _run(bench)
    x64 = x.astype(np.float64)
    shifted = np.exp(x64 - x64.max(-1, keepdims=True))
    centered = x64 - x64.mean(-1, keepdims=True)
    expected = {
        "softmax": shifted / shifted.sum(-1, keepdims=True),
        "log_softmax": np.log(shifted / shifted.sum(-1, keepdims=True)),
        "layer_norm": centered / np.sqrt((centered ** 2).mean(-1, keepdims=True) + 1e-5) * w,
        "rms_norm": x64 / np.sqrt((x64 ** 2).mean(-1, keepdims=True) + 1e-6),
        "gelu_tanh": 0.5 * x64 * (1 + np.tanh(np.sqrt(2 / np.pi) * (x64 + 0.044715 * x64 ** 3))),
        "var": x64.var(1, ddof=1), "std": x64.std(ddof=1), "norm": np.sqrt((x64 ** 2).sum()),
        "where": np.where(x64 > 0, x64, 0.0), "clamp": np.clip(x64, -0.5, 0.5),
        "masked_fill": np.where(x64 < 0, -1.0, x64),
        "cat": np.concatenate([x64, x64[:2]]), "stack": np.stack([x64, x64], axis=1),
    }
    for name, value in expected.items():
        assert_close(got[name], value, "f32")


def test_adr0016_t11_in_place_ops_write_through_views_and_refuse_narrowing():
    def bench(torch):
        x = torch.zeros(4, 4)
        x[1:3] += 2.0
        x[:, 0].mul_(5.0)
        x.T[3].add_(torch.ones(4))
        counts = torch.zeros(3, dtype=torch.int32)
        with pytest.raises(TensorError, match="result type f32 can't be cast to the output .* of type i32"):
            counts.add_(0.5)
        return x.numpy()

    _, got = _run(bench)
    expected = np.zeros((4, 4), dtype=np.float32)
    expected[1:3] += 2.0
    expected[:, 0] *= 5.0
    expected.T[3] += 1.0
    assert np.array_equal(got, expected)


def test_adr0016_t12_comparisons_to_the_host_are_one_value():
    def bench(torch):
        a = torch.ones(8)
        b = a + 1e-7
        return torch.allclose(a, b), torch.equal(a, a * 1), torch.equal(a, b + 1), bool((a == 1).all())

    _, got = _run(bench)
    assert got == (True, True, False, True)


def test_adr0016_t13_operands_on_different_devices_are_one_error():
    def bench(torch):
        with pytest.raises(TensorError, match=r"^add: expected all tensors to be on the same device, got "):
            torch.ones(3, device="ahbm:0") + torch.ones(3, device="ahbm:1")

    _run(bench)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 5), st.integers(1, 40), st.sampled_from(["add", "mul", "maximum", "sub"]))
def test_adr0016_t14_ops_on_strided_views_match_numpy(rows, cols, name):
    """Inputs that are transposed and sliced views, and a broadcast row, as numpy computes them."""
    rng = np.random.default_rng(rows * 100 + cols)
    a = rng.normal(size=(cols, rows)).astype(np.float32)
    b = rng.normal(size=(1, cols)).astype(np.float32)
    _, got = _run(lambda torch: getattr(torch.tensor(a).T[:, ::2], name)(torch.tensor(b)[:, ::2]).numpy())
    assert_close(got, BINARY[name].numpy(a.T[:, ::2], b[:, ::2]), "f32")


def test_adr0016_t16_index_add_of_one_tile_takes_its_closed_form_on_an_idle_machine():
    """One tile of distinct targets on one PE: load the out tile, gather the source elements aimed at it, one
    vector pass over them, store the tile; each a DMA through the PE's engine (`dma_ps`)."""
    from kernbench.runtime_api.ops.device_ops import index_add

    n, targets = 96, np.arange(96) % 10  # ten distinct targets, each hit nine or ten times
    session = Session("default")

    def bench(torch):
        out, source = torch.zeros(10), torch.ones(n)
        torch.ahbm.synchronize()
        index_add(out, targets, source)
        return out.numpy()

    result = session.run(bench, session.torch)
    np.testing.assert_array_equal(result, np.bincount(targets).astype(np.float32))
    topology = session.ctx.topology
    ops = session.ctx.machine.oplog.select(label="index_add")
    assert [op.kind for op in ops] == ["dma", "dma", "vector", "dma"]
    tile, gathered = (dma_ps(topology, count * 4, data_cube=0, pe_cube=0) for count in (10, n))
    assert ops[-1].end - ops[0].start == tile + gathered + vector_ps(topology, n) + tile


@st.composite
def _broadcast_views(draw):
    """(layout, shape, start, stop): a view with any strides (broadcast axes, negative strides) under a shape it
    broadcasts to, and a range of that shape's row-major positions."""
    shape = tuple(draw(st.lists(st.integers(1, 9), max_size=4)))
    kept = draw(st.integers(0, len(shape)))
    view_shape = tuple(1 if draw(st.booleans()) else n for n in shape[len(shape) - kept:])
    strides = tuple(draw(st.integers(-50, 50)) for _ in view_shape)
    numel = int(np.prod(shape)) if shape else 1
    start = draw(st.integers(0, numel - 1))
    stop = draw(st.integers(start + 1, numel))
    return Layout(view_shape, strides, draw(st.integers(0, 500))), shape, start, stop


@settings(max_examples=150, deadline=None)
@given(_broadcast_views())
def test_adr0016_t101_storage_indices_follow_the_view_rule_position_by_position(case):
    layout, shape, start, stop = case
    got = storage_indices(layout, shape, start, stop)
    if isinstance(got, slice):
        got = np.arange(got.start, got.stop)
    lead = len(shape) - len(layout.shape)
    expected = []
    for position, index in enumerate(np.ndindex(*shape)):
        if start <= position < stop:
            expected.append(layout.offset + sum(index[lead + axis] * stride for axis, (n, stride)
                                                in enumerate(zip(layout.shape, layout.strides)) if n != 1))
    assert got.tolist() == expected


# A PE's TCM share is a quarter of its TCM. A square tile of side s (BLOCK_K = s/2) holds s² elements of A and B
# blocks, an s² accumulator (4 bytes for f16/f32) and an s² result: s² · (2·itemsize + 4) bytes.
@pytest.mark.parametrize(("topology", "batches", "m", "n", "dtype", "tile"), [
    # default: 1 MiB TCM -> 256 KiB share, 32 PEs a SIP. f16: s=128 needs 128 KiB, s=256 needs 512 KiB.
    ("default", 1, 1024, 1024, "f16", (128, 128, 64)),  # 8 x 8 = 64 tiles of 128 >= 32 PEs
    ("default", 1, 512, 512, "f16", (64, 64, 32)),  # 4 x 4 = 16 tiles of 128 < 32 PEs: the smallest
    ("default", 2, 500, 520, "f16", (128, 128, 64)),  # 2 x 4 x 5 = 40 tiles, tails included
    ("default", 1, 1024, 1024, "f32", (128, 128, 64)),  # f32: s=128 needs 192 KiB
    # large: 2 MiB TCM -> 512 KiB share, 128 PEs a SIP. f16 s=256: 512 KiB, fits exactly; f32 s=256: 768 KiB.
    ("large", 1, 2048, 4608, "f16", (256, 256, 128)),  # GPT-3's QKV at tp 8: 8 x 18 = 144 tiles
    ("large", 1, 2048, 4608, "f32", (128, 128, 64)),
    ("large", 1, 2048, 1024, "f16", (128, 128, 64)),  # 8 x 4 = 32 tiles of 256 < 128; 16 x 8 = 128 of 128
    # h100: 228 KiB TCM -> 57 KiB share: even s=128 (128 KiB) does not fit.
    ("h100", 1, 8192, 8192, "f16", (64, 64, 32)),
])
def test_adr0016_t104_a_matmul_tile_is_the_largest_that_fits_a_tcm_share_and_gives_every_pe_a_program(
        topology, batches, m, n, dtype, tile):
    from kernbench.runtime_api.ops.device_ops import gemm_tile

    session = Session(topology)
    assert gemm_tile(session.ctx, batches, m, n, resolve_dtype(dtype)) == tile
    # The Triton linear of kernbench.tp starts from its own smallest tile, (64, 128, 64).
    linear_tile = gemm_tile(session.ctx, batches, m, n, resolve_dtype(dtype), smallest=(64, 128, 64))
    assert linear_tile == (tile if tile[0] > 64 else (64, 128, 64))


@pytest.mark.parametrize("dtype", ["f16", "f32"])
def test_adr0016_t105_a_matmul_in_library_tiles_gives_numpys_values_and_each_tile_is_its_flops(dtype):
    """(2, 500, 200) @ (200, 520) on the default machine (32 PEs): folded, as torch folds a tensor times a matrix,
    into one GEMM of 1000 rows; the library plan's tiles cover it with masked row and column tails, one program
    each (K unsplit: the grid already fills the PEs); each program's one gemm op is its tile's 2·m·n·K flops over
    the matrix unit."""
    rng = np.random.default_rng(105)
    # Scaled by a power of two (exact) so that sums of 200 products stay near 1, where f32's tolerance is set.
    a, b = _values(rng, (2, 500, 200), dtype) / 16, _values(rng, (200, 520), dtype) / 16
    session, got = _run(lambda torch: (torch.tensor(a) @ torch.tensor(b)).numpy())
    assert_close(got, a.astype(np.float32) @ b.astype(np.float32), dtype)
    plan = library_gemm.library_plan(session.ctx, 1, 1000, 520, 200, resolve_dtype(dtype))
    assert plan.splits == 1 and -(-1000 // plan.block_m) * -(-520 // plan.block_n) >= 32
    gemms = [op for op in session.ctx.machine.oplog.select(label="matmul") if op.kind == "gemm"]
    rows = [min(plan.block_m, 1000 - start) for start in range(0, 1000, plan.block_m)]
    cols = [min(plan.block_n, 520 - start) for start in range(0, 520, plan.block_n)]
    assert sorted(op.flops for op in gemms) == sorted(2 * m * n * 200 for m in rows for n in cols)
    for op in gemms:
        assert op.end - op.start == gemm_ps(session.ctx.topology, dtype, op.flops)


def test_adr0016_t129_a_tile_loads_its_first_stage_then_runs_its_mmas_beside_the_rest_of_its_loads():
    """512 x 512 x 512 f16 on an idle default machine (its grid fills the 32 PEs: K unsplit): program 0's gemm op of
    2·bm·bn·512 flops starts when its first stage's A and B loads (K up to PIPELINE_K) end; the rest of its
    panels loads while it runs; its C store starts once the last of both has ended."""
    session, _ = _run(lambda torch: (torch.ones(512, 512, dtype="f16") @ torch.ones(512, 512, dtype="f16")).numpy())
    plan = library_gemm.library_plan(session.ctx, 1, 512, 512, 512, resolve_dtype("f16"))
    assert plan.splits == 1
    ops = [op for op in session.ctx.machine.oplog.select(label="matmul") if op.program == 0]
    gemm = next(op for op in ops if op.kind == "gemm")
    loads = [op for op in ops if op.kind == "dma" and op.args.get("dst", "").endswith("tcm")]
    stores = [op for op in ops if op.kind == "dma" and op.args.get("src", "").endswith("tcm")]
    first_stage = [op for op in loads if op.end <= gemm.start]
    assert gemm.flops == 2 * plan.block_m * plan.block_n * 512
    assert gemm.start == max(op.end for op in first_stage)
    assert sum(op.nbytes for op in first_stage) == (plan.block_m + plan.block_n) * library_gemm.PIPELINE_K * 2
    later = [op for op in loads if op not in first_stage]
    assert later and min(op.start for op in later) < gemm.end  # the rest loads beside the MMAs
    assert min(op.start for op in stores) >= max(gemm.end, max(op.end for op in later))  # then its route is free


def _op_times(topology, ops: int) -> tuple[int, int]:
    """Simulated ps from before `ops` back-to-back adds of 2^21 float32 elements to the end of their device work,
    and of one alone, timing-only."""
    session = Session(topology, timing_only=True)
    spans = []

    def bench(torch):
        x, y = torch.randn(1 << 21, device="cuda"), torch.randn(1 << 21, device="cuda")
        for count in (1, ops):
            torch.cuda.synchronize()
            start = session.engine.now
            for _ in range(count):
                x + y
            torch.cuda.synchronize()
            spans.append(session.engine.now - start)

    session.run(bench, session.torch)
    return spans[0], spans[1]


def test_adr0016_t128_a_launch_costs_the_host_its_launch_time_which_running_ahead_hides(tmp_path):
    """On h100 with a launch of 5 us (the shipped one is dearer: a smaller launch lets smaller ops show the
    rule): one op alone takes the launch time plus what it takes with none; four back to back take one launch
    time plus four ops' device time when each op's device time exceeds a launch."""
    from kernbench.topology import load_topology
    from tests.derived_topology import derived_topology

    shipped = f"kernel_launch_ns: {load_topology('h100').system.kernel_launch_ps // 1000}"
    timed = derived_topology(tmp_path, "h100", [(shipped, "kernel_launch_ns: 5000")], "timed.yaml")
    free = derived_topology(tmp_path, "h100", [(shipped, "kernel_launch_ns: 0")], "free.yaml")
    launch = load_topology(timed).system.kernel_launch_ps
    assert launch == 5_000_000
    alone_free, four_free = _op_times(str(free), 4)
    alone, four = _op_times(str(timed), 4)
    assert alone == alone_free + launch
    assert alone_free > launch  # so the host runs ahead of the device from the second op on
    assert four == four_free + launch


def test_adr0016_t130_a_matmul_in_a_dtype_the_matrix_unit_has_no_rate_for_is_one_line_naming_op_dtype_and_topology(
        tmp_path):
    from tests.cli import run_kernbench_in_process

    bench = tmp_path / "integer_matmul.py"
    bench.write_text("def run(torch):\n    a = torch.ones(4, 4, dtype=torch.int64)\n    a @ a\n")
    result = run_kernbench_in_process("run", str(bench), cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0 and "Traceback" not in result.stderr
    assert "matmul" in result.stderr and "i64" in result.stderr and "default.yaml" in result.stderr


@pytest.mark.parametrize("shape, dim", [((1 << 16,), None), ((6, 5000), 1), ((300, 7), 0), ((4, 3, 2000), (0, 2))])
@pytest.mark.parametrize("op", ["var", "norm"])
def test_adr0016_t132_var_and_norm_are_one_reduction_pass_each_and_exact(shape, dim, op):
    """var (Welford: counts, means and squared deviations merged pairwise) and norm (sum of squares, root at the
    end) log vector passes under their own name only — split over the PEs where the outputs are few — and give
    numpy's values; var with either correction, and both with the gradients of their closed forms."""
    rng = np.random.default_rng(132)
    x = rng.uniform(-2.0, 3.0, shape).astype(np.float32)
    axes = None if dim is None else dim
    grad = None

    def bench(torch):
        nonlocal grad
        t = torch.tensor(x, requires_grad=True)
        torch.ahbm.synchronize()
        if op == "var":
            got = [t.var(dim), t.var(dim, correction=0)]
        else:
            got = [torch.norm(t) if dim is None else torch.norm(t, dim=dim)]
        got[0].sum().backward()
        grad = t.grad.numpy()
        return [g.numpy() for g in got]

    session, got = _run(bench)
    labels = {r.label for r in session.ctx.machine.oplog if r.kind == "vector" and r.label in ("var", "norm")}
    assert labels == {op}
    wide = x.astype(np.float64)
    if op == "var":
        count = wide.size // np.var(wide, axis=axes).size
        np.testing.assert_allclose(got[0], np.var(wide, axis=axes, ddof=1), rtol=1e-5)
        np.testing.assert_allclose(got[1], np.var(wide, axis=axes), rtol=1e-5)
        expected = 2 * (wide - wide.mean(axis=axes, keepdims=True)) / (count - 1)
    else:
        total = np.sqrt(np.square(wide).sum(axis=axes, keepdims=True))
        np.testing.assert_allclose(got[0], total.reshape(got[0].shape), rtol=1e-5)
        expected = wide / total
    np.testing.assert_allclose(grad, expected, rtol=1e-4, atol=1e-6)


def test_adr0016_t135_a_large_op_streams_runs_of_tiles_in_four_programs_a_slot():
    """On the default machine (32 PEs, 2 resident programs: 64 slots) 2^22 f32 elements are 1024 tiles of 4096
    for x + y: 256 programs of 4 tiles each (four a slot); a softmax over their rows streams alike; values are
    numpy's."""
    rng = np.random.default_rng(135)
    x, y = rng.standard_normal((1 << 12, 1 << 10)).astype(np.float32), rng.standard_normal(1 << 22).astype(np.float32)
    got = {}

    def bench(torch):
        tx, ty = torch.tensor(x), torch.tensor(y).view(1 << 12, 1 << 10)
        got["sum"] = (tx + ty).numpy()
        got["soft"] = torch.softmax(tx, -1).numpy()

    session = Session("default")
    session.run(bench, session.torch)
    ctx = session.ctx
    slots = device_ops.STREAMED_PER_SLOT * ctx.topology.pes_per_sip * ctx.topology.pe.resident_programs
    for label in ("add", "softmax"):
        programs = {op.program for op in ctx.machine.oplog.select(label=label) if op.kind == "vector"}
        assert 0 < len(programs) <= slots, label
    tile = device_ops.tile_elements(ctx, 12)
    assert device_ops.streamed(ctx, 1 << 22, tile) == tile * -(-((1 << 22) // tile) // slots)
    np.testing.assert_array_equal(got["sum"], x + y.reshape(x.shape))
    np.testing.assert_allclose(got["soft"], np.exp(x - x.max(-1, keepdims=True))
                               / np.exp(x - x.max(-1, keepdims=True)).sum(-1, keepdims=True), rtol=1e-5)


@pytest.mark.parametrize("op, reads", [("layer_norm", 2), ("rms_norm", 2), ("softmax", 1)])
def test_adr0016_t136_norms_read_each_row_twice_the_second_time_from_hbm(op, reads):
    """On h100 (an L2 of 50 MB) a 1 MiB float32 tensor: a norm's DMAs move its bytes three times (two reads, one
    write), a softmax's twice; every read misses the L2, though the norm's second read follows its first at once
    and the whole tensor fits the L2."""
    rows, row = 256, 1024
    session = Session("h100", timing_only=True)

    def bench(torch):
        x = torch.randn(rows, row, device="cuda")
        torch.cuda.synchronize()
        getattr(torch.nn.functional, op)(x, **({"dim": -1} if op == "softmax" else {"normalized_shape": (row,)}))
        torch.cuda.synchronize()

    session.run(bench, session.torch)
    machine = session.ctx.machine
    moved = sum(record.nbytes for record in machine.oplog.select(label=op) if record.kind == "dma")
    assert moved == (reads + 1) * rows * row * 4
    tags = machine.l2_tags(0)
    assert tags.hits == 0 and tags.misses > 0


def test_adr0016_t137_the_device_spends_its_kernel_start_on_every_kernel_however_far_ahead_the_host_is(tmp_path):
    """On h100 (1.75 us a kernel's start): four small adds the host queued behind a large one end four kernel
    starts later than on the same machine whose kernels start at once (and the large one one start later)."""
    from kernbench.topology import load_topology
    from tests.derived_topology import derived_topology

    start = load_topology("h100").sip.kernel_start_ps
    assert start > 0
    # A launch of 5 us, so the host queues the small adds while the large one runs.
    shipped = f"kernel_launch_ns: {load_topology('h100').system.kernel_launch_ps // 1000}"
    timed = derived_topology(tmp_path, "h100", [(shipped, "kernel_launch_ns: 5000")], "timed.yaml")
    at_once = derived_topology(tmp_path, "h100", [(shipped, "kernel_launch_ns: 5000"),
                                                  ("kernel_start_ns: 1750", "kernel_start_ns: 0")], "at_once.yaml")

    def queued(topology, ops: int) -> int:
        session = Session(topology, timing_only=True)
        spans = []

        def bench(torch):
            big, x = torch.randn(1 << 24, device="cuda"), torch.randn(1 << 10, device="cuda")
            torch.cuda.synchronize()
            began = session.engine.now
            big.add_(1.0)
            for _ in range(ops):
                x.add_(1.0)
            torch.cuda.synchronize()
            spans.append(session.engine.now - began)

        session.run(bench, session.torch)
        return spans[0]

    assert queued(str(timed), 4) - queued(str(at_once), 4) == 5 * start


def test_adr0016_t147_each_further_gpu_of_a_spawn_makes_a_launch_dearer_by_the_hosts_growth(tmp_path):
    """h200x4 cut to 1, 2 and 4 GPUs, a worker per GPU: a host-bound loop of small adds takes the launch time
    times 1 + host_growth_per_gpu x (workers - 1) per add; on one GPU, the one-GPU launch time."""
    from kernbench.topology import load_topology
    from tests.derived_topology import derived_topology

    def per_add(gpus: int) -> float:
        topology = derived_topology(tmp_path, "h200x4", [("sips: {count: 4}", f"sips: {{count: {gpus}}}")],
                                    f"h200x{gpus}.yaml")
        session = Session(topology, timing_only=True)
        spans = {}

        def bench(torch):
            def worker(rank):
                torch.cuda.set_device(rank)
                x = torch.randn(1 << 10, device="cuda")
                torch.cuda.synchronize()
                began = session.engine.now
                for _ in range(20):
                    x.add_(1.0)
                torch.cuda.synchronize()
                spans[rank] = (session.engine.now - began) / 20

            torch.multiprocessing.spawn(worker, nprocs=gpus)

        session.run(bench, session.torch)
        return spans[0]

    system = load_topology("h200x4").system
    assert system.host_growth_per_gpu > 0
    for gpus in (1, 2, 4):
        launch = system.kernel_launch_ps * (1 + system.host_growth_per_gpu * (gpus - 1))
        assert launch <= per_add(gpus) <= launch * 1.01


@pytest.mark.quick
def test_adr0016_t170_softmax_takes_torchs_kernel_a_warp_a_row_or_a_block_a_row():
    """torch's dispatch (aten's SoftMax.cu): a warp a row for rows of at most 1024 elements and 4096 bytes, else a
    block a row, whose elements take `BLOCK_ROW_PASSES` more; softmax takes each element's exponential twice,
    log_softmax once, each at `EXPONENTIAL_PASSES` beside the row kernels' passes."""
    from kernbench.runtime_api.ops import functional

    warp = functional.ROW_KERNEL_PASSES
    block = warp + functional.BLOCK_ROW_PASSES
    exponential = functional.EXPONENTIAL_PASSES
    assert functional.softmax_passes(1024, 4, 2) == warp + 2 * exponential
    assert functional.softmax_passes(1024, 2, 1) == warp + exponential
    assert functional.softmax_passes(512, 8, 2) == warp + 2 * exponential
    assert functional.softmax_passes(513, 8, 2) == block + 2 * exponential
    assert functional.softmax_passes(1025, 2, 1) == block + exponential
    assert functional.softmax_passes(50257, 4, 2) == block + 2 * exponential


@pytest.mark.parametrize("op, exponentials", [("softmax", 2), ("log_softmax", 1)])
@pytest.mark.parametrize("rows, row", [(4, 512), (2, 2048)])
@pytest.mark.quick
def test_adr0016_t171_a_softmax_program_takes_its_closed_form_on_an_idle_machine(op, exponentials, rows, row):
    """One program on one PE (rows of 512: a warp a row; of 2048: a block a row): its rows loaded, one vector op of
    the kernel's passes over every element, its rows stored — numpy's values."""
    from kernbench.runtime_api.ops import functional

    rng = np.random.default_rng(171)
    x = rng.standard_normal((rows, row)).astype(np.float32)
    got = {}

    def bench(torch):
        tx = torch.tensor(x)
        torch.ahbm.synchronize()
        got["y"] = getattr(torch, op)(tx, -1).numpy()

    session = Session("default")
    session.run(bench, session.torch)
    topology = session.ctx.topology
    ops = session.ctx.machine.oplog.select(label=op)
    one_dma = dma_ps(topology, rows * row * 4, data_cube=0, pe_cube=0)
    compute = vector_ps(topology, functional.softmax_passes(row, 4, exponentials) * rows * row)
    assert [o.kind for o in ops] == ["dma", "vector", "dma"]
    assert ops[1].end - ops[1].start == compute
    assert ops[-1].end - ops[0].start == 2 * one_dma + compute
    shifted = x - x.max(-1, keepdims=True)
    total = np.exp(shifted).sum(-1, keepdims=True)
    np.testing.assert_allclose(got["y"], np.exp(shifted) / total if op == "softmax" else shifted - np.log(total),
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("numel, op", [(1 << 20, "sum"), (1 << 20, "var"), (1 << 28, "sum")])
def test_adr0016_t180_a_reduction_takes_torchs_reduce_kernel_parts_and_passes_and_one_host_launch(numel, op):
    """A full reduction on the h100, timing-only: its first kernel is a program per part of at least `PART_CHUNKS`
    chunks (torch's 16 vector loads a thread), no more than four programs a program slot, each one vector op of
    the reduction's passes over its part (var: `WELFORD_PASSES`); its merge is the op's second kernel, whose
    launch the host does not pay again: the call returns one `kernel_launch_ns` after it began."""
    session = Session("h100", timing_only=True)
    topology = session.ctx.topology
    called = {}

    def bench(torch):
        x = torch.empty(numel, device="cuda")
        torch.cuda.synchronize()
        start = session.engine.now
        getattr(x, op)()
        called["host"] = session.engine.now - start
        torch.cuda.synchronize()

    session.run(bench, session.torch)
    chunk = device_ops.tile_elements(session.ctx, 4)
    slots = device_ops.STREAMED_PER_SLOT * topology.pes_per_sip * topology.pe.resident_programs
    parts = min(slots, numel // (device_ops.PART_CHUNKS * chunk))
    passes = reductions.WELFORD_PASSES if op == "var" else 1
    vectors = [r for r in session.ctx.machine.oplog.select(label=op) if r.kind == "vector"]
    first = sorted(r.args["elements"] for r in vectors[:-1])
    assert len(vectors) == parts + 1  # the parts, then one merge program
    assert sum(first) == passes * numel and first[-1] == passes * -(-numel // parts)
    assert vectors[-1].args["elements"] == passes * parts
    assert called["host"] == topology.system.kernel_launch_ps


@pytest.mark.parametrize("op, passes", [("gelu", table.ERF_PASSES), ("erf", table.ERF_PASSES), ("relu", 1),
                                        ("exp", 1)])
def test_adr0016_t181_an_elementwise_ops_vector_op_is_its_rows_passes(op, passes):
    """erf and the exact gelu take `ERF_PASSES` vector passes over each element, other elementwise rows one; the
    values stay numpy's."""
    values = np.random.default_rng(181).uniform(-3, 3, 4096).astype(np.float32)
    session, got = _run(lambda torch: getattr(torch.tensor(values), op)().numpy())
    vectors = [r for r in session.ctx.machine.oplog.select(label=op) if r.kind == "vector"]
    assert sum(r.args["elements"] for r in vectors) == passes * values.size
    assert_close(got, table.ROWS[op].numpy(values.astype(np.float64)), "f32")
