"""ADR 0007, "Replayed programs": a grid interpreted once per program shape, and the port cannot tell.

Each test runs one launch twice over fresh memory, once interpreting every
program (`replays = False`) and once replaying traces, and compares the
transcripts: every port call of every program, in order, with every array
argument by value. Memory afterwards, faults and printed output must match
too; `interpretations` says how often the kernel's Python actually ran.
"""

from __future__ import annotations

import sys
import tracemalloc

import numpy as np
import pytest
import triton
import triton.language as tl
from flat_port import FlatMemory, FlatPort, run_grid
from kernels_under_test import add_kernel, full_and_zeros_kernel, matmul_kernel, softmax_kernel

from kernbench.kernels import KernelFault, prepare_launch
from kernbench.kernels import kept_values
from kernbench.kernels.triton_bridge import kept_shapes
from kernbench.kernels.triton_bridge.tape import Tape
from kernbench.run_caches import RunCaches

# The caches `run_both`'s launches share, as a run's launches do (ADR 0007, "Shapes kept across launches").
CACHES = RunCaches()


@pytest.fixture(autouse=True)
def no_kept_shapes(monkeypatch):
    """Each test starts with no shapes kept from other launches, so its counts of interpretations are its own
    launches'."""
    monkeypatch.setattr(sys.modules[__name__], "CACHES", RunCaches())


def _kept(fn) -> list:
    return CACHES["triton_bridge.kept_shapes"][fn]


def _value(argument):
    if isinstance(argument, np.ndarray):
        return (argument.shape, str(argument.dtype), argument.tobytes())
    return argument


class TranscriptPort(FlatPort):
    """A `FlatPort` that writes down every call with its arguments, tagged with the program making it."""

    def __init__(self, memory: FlatMemory) -> None:
        super().__init__(memory)
        self.program = None
        self.transcript: list[tuple] = []

    def _note(self, method: str, *arguments) -> None:
        self.transcript.append((self.program, method, *map(_value, arguments)))

    def load(self, addresses, mask, dtype_name):
        self._note("load", addresses, mask, dtype_name)
        return super().load(addresses, mask, dtype_name)

    def store(self, addresses, values, mask):
        self._note("store", addresses, values, mask)
        super().store(addresses, values, mask)

    def dot(self, a, b, acc, out_dtype_name):
        self._note("dot", a, b, acc, out_dtype_name)
        return super().dot(a, b, acc, out_dtype_name)

    def vector(self, op, n_elements, dtype_name):
        self._note("vector", op, n_elements, dtype_name)
        super().vector(op, n_elements, dtype_name)


def run_both(make, kernel, grid, meta, timing_only=False, runs=(False, True)):
    """[(transcript, memory bytes, launch, fault)] of the interpreted run, then of the replayed one (`runs`: which
    of them, `replays` of each)."""
    results = []
    for replays in runs:
        memory = FlatMemory()
        args = make(memory)
        launch = prepare_launch(kernel, grid, args, meta, timing_only=timing_only, caches=CACHES)
        launch.replays = replays
        port = TranscriptPort(memory)
        fault = None
        try:
            for z in range(launch.grid[2]):
                for y in range(launch.grid[1]):
                    for x in range(launch.grid[0]):
                        port.program = (x, y, z)
                        launch.run_program((x, y, z), port)
        except KernelFault as error:
            fault = error
        results.append((port.transcript, memory.buffer.tobytes(), launch, fault))
    return results


def assert_same(results):
    (interpreted, memory_i, _, fault_i), (replayed, memory_r, _, fault_r) = results
    assert len(replayed) == len(interpreted)
    assert replayed == interpreted
    assert memory_r == memory_i
    assert str(fault_r) == str(fault_i)


def _vectors(n):
    def make(memory):
        rng = np.random.default_rng(n)
        x = memory.from_numpy("x", rng.standard_normal(n), "f32")
        y = memory.from_numpy("y", rng.standard_normal(n), "f32")
        return x, y, memory.zeros("out", (n,), "f32"), n
    return make


def _matmul(m, n, k):
    def make(memory):
        rng = np.random.default_rng(m)
        a = memory.from_numpy("a", rng.standard_normal((m, k)), "f16")
        b = memory.from_numpy("b", rng.standard_normal((k, n)), "f16")
        c = memory.zeros("c", (m, n), "f16")
        return a, b, c, m, n, k, k, 1, n, 1, n, 1
    return make


def _rows(rows, cols):
    def make(memory):
        x = memory.from_numpy("x", np.random.default_rng(rows).standard_normal((rows, cols)), "f32")
        return memory.zeros("y", (rows, cols), "f32"), x, cols, cols, cols
    return make


@triton.jit
def transpose_tiles(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK * BLOCK + tl.arange(0, BLOCK)[:, None] * BLOCK + tl.arange(0, BLOCK)[None, :]
    tl.store(out_ptr + offsets, tl.trans(tl.load(x_ptr + offsets)))


def _tiles(count, block):
    def make(memory):
        x = memory.from_numpy("x", np.arange(count * block * block, dtype=np.float32), "f32")
        return x, memory.zeros("out", (count * block * block,), "f32")
    return make


CASES = {
    # 5 programs, the last with a masked tail: one trace serves all.
    "vector add": (_vectors(1100), add_kernel, (5,), {"BLOCK_SIZE": 256}, 1),
    # 3 x 3 tiles in groups of 2 block-rows: `min(num_pid_m - first_pid_m, GROUP_SIZE_M)` is a
    # constexpr in the first group and a tensor in the last, so two shapes; K has a masked tail.
    "grouped matmul": (_matmul(40, 48, 40), matmul_kernel, (9,),
                       {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 16, "BLOCK_SIZE_K": 16, "GROUP_SIZE_M": 2}, 2),
    # Reductions (`tl.max`, `tl.sum`) and `other=-inf`.
    "softmax": (_rows(6, 50), softmax_kernel, (6,), {"BLOCK_SIZE": 64}, 1),
    # A layout op on loaded values: timing only, it passes on what the port returned (this port
    # returns real data), so the store receives the same values either way.
    "transposed tiles": (_tiles(3, 8), transpose_tiles, (3,), {"BLOCK": 8}, 1),
}


@pytest.mark.parametrize("timing_only", [False, True], ids=["values", "timing only"])
@pytest.mark.parametrize("case", list(CASES))
def test_adr0007_t55_replayed_programs_make_exactly_the_port_calls_of_interpreted_ones(case, timing_only):
    make, kernel, grid, meta, shapes = CASES[case]
    results = run_both(make, kernel, grid, meta, timing_only)
    assert_same(results)
    assert results[0][2].interpretations == grid[0]
    assert results[1][2].interpretations == shapes


@triton.jit
def branch_on_program_id(x_ptr, out_ptr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offsets)
    if pid // 4 % 2 == 0:
        x = x * 2.0
    tl.store(out_ptr + offsets, x)


@triton.jit
def loop_to_program_id(x_ptr, out_ptr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offsets)
    for _ in range(pid):
        x = x + 1.0
    tl.store(out_ptr + offsets, x)


def _vector_pair(n):
    def make(memory):
        return memory.from_numpy("x", np.arange(n, dtype=np.float32), "f32"), memory.zeros("out", (n,), "f32")
    return make


def test_adr0007_t56_programs_whose_control_flow_depends_on_their_id_get_one_trace_per_shape():
    # Programs 0-3 and 8-11 double x, 4-7 do not: two shapes, each traced by its first program.
    results = run_both(_vector_pair(12 * 8), branch_on_program_id, (12,), {"BLOCK": 8})
    assert_same(results)
    assert results[1][2].interpretations == 2


def test_adr0007_t57_a_kernel_whose_every_program_differs_stops_tracing_after_two_shapes():
    # Loop trip counts 0..5: no trace serves a second program, so after two dry runs (which
    # stand in for the interpretation of the programs they were made for) the rest are interpreted.
    results = run_both(_vector_pair(6 * 8), loop_to_program_id, (6,), {"BLOCK": 8})
    assert_same(results)
    assert results[1][2].interpretations == 6


@triton.jit
def branch_on_memory(flag_ptr, out_ptr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    if tl.load(flag_ptr + pid) > 0:
        tl.store(out_ptr + offsets, tl.full((BLOCK,), 1.0, tl.float32))


@triton.jit
def block_pointer_copy(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    source = tl.make_block_ptr(x_ptr, (n,), (1,), (pid * BLOCK,), (BLOCK,), (0,))
    target = tl.make_block_ptr(out_ptr, (n,), (1,), (pid * BLOCK,), (BLOCK,), (0,))
    tl.store(target, tl.load(source, boundary_check=(0,)) + 1.0, boundary_check=(0,))


def test_adr0007_t58_control_flow_on_memory_and_block_pointers_are_interpreted_program_by_program():
    def flags(memory):
        return memory.from_numpy("flag", np.array([1, 0, 1, 0], np.int32), "i32"), memory.zeros("out", (32,), "f32")

    def vectors(memory):
        return memory.from_numpy("x", np.arange(30, dtype=np.float32), "f32"), memory.zeros("out", (30,), "f32"), 30

    for make, kernel, meta in ((flags, branch_on_memory, {"BLOCK": 8}), (vectors, block_pointer_copy, {"BLOCK": 8})):
        results = run_both(make, kernel, (4,), meta)
        assert_same(results)
        # One dry run that gave up, then every program interpreted.
        assert results[1][2].interpretations == 1 + 4


def test_adr0007_t59_a_fault_in_a_replayed_program_is_the_fault_interpretation_raises_at_the_same_call():
    def make(memory):
        x = memory.from_numpy("x", np.ones(1024, np.float32), "f32")
        y = memory.from_numpy("y", np.ones(1024, np.float32), "f32")
        return x, y, memory.zeros("out", (1000,), "f32"), 1024  # the last program stores past `out`

    results = run_both(make, add_kernel, (4,), {"BLOCK_SIZE": 256})
    assert_same(results)
    fault = results[1][3]
    assert (fault.kernel, fault.program_id, fault.tensor, fault.offset) == ("add_kernel", (3, 0, 0), "out", 4000)
    assert results[1][0][-1][:2] == ((3, 0, 0), "store")


@triton.jit
def print_program(out_ptr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    values = pid * 10 + tl.arange(0, BLOCK)
    tl.device_print("values", values)
    tl.store(out_ptr + pid * BLOCK + tl.arange(0, BLOCK), values)


def test_adr0007_t60_a_replayed_print_shows_each_programs_own_values(capsys):
    def make(memory):
        return (memory.zeros("out", (12,), "i32"),)

    printed = []
    for replays in (False, True):
        memory = FlatMemory()
        launch = prepare_launch(print_program, (3,), make(memory), {"BLOCK": 4})
        launch.replays = replays
        run_grid(launch, FlatPort(memory))
        printed.append(capsys.readouterr().out)
    assert printed[1] == printed[0]
    assert printed[1].count("values") == 3
    assert "[20 21 22 23]" in printed[1]


def _replayed_program_peak_bytes(k_steps: int, timing_only: bool) -> int:
    """Peak Python allocation while program 3 of a 2 x 2 grid of 64 x 64 tiles replays a K loop of `k_steps`."""
    m = n = block = 64
    k = block * k_steps
    memory = FlatMemory()
    rng = np.random.default_rng(k_steps)
    a = memory.from_numpy("a", rng.standard_normal((2 * m, k)), "f16")
    b = memory.from_numpy("b", rng.standard_normal((k, 2 * n)), "f16")
    c = memory.zeros("c", (2 * m, 2 * n), "f16")
    launch = prepare_launch(matmul_kernel, (4,), (a, b, c, 2 * m, 2 * n, k, k, 1, 2 * n, 1, 2 * n, 1),
                            {"BLOCK_SIZE_M": block, "BLOCK_SIZE_N": block, "BLOCK_SIZE_K": block, "GROUP_SIZE_M": 1},
                            timing_only=timing_only)
    port = FlatPort(memory)
    run_grid(launch, port)  # every shape recorded: the measured run below is a replay
    tracemalloc.start()
    try:
        launch.run_program((3, 0, 0), port)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("timing_only", [False, True], ids=["values", "timing only"])
def test_adr0007_t62_a_replayed_program_holds_one_step_of_its_loop_not_all_of_them(monkeypatch, timing_only):
    # Results remembered for later programs are bounded apart (MEMO_BYTES); here only what the running
    # program itself holds is measured. Its addresses and tiles of one K step are ~100 KiB: eight
    # times the steps must not hold eight times the bytes.
    monkeypatch.setattr(kept_values, "MEMO_BYTES", 0)
    short, long = (_replayed_program_peak_bytes(steps, timing_only) for steps in (4, 32))
    assert long < 1.5 * short


def test_adr0007_t63_the_launches_of_a_run_share_one_memo_pool_and_give_it_back_when_they_end(monkeypatch):
    """Two ranks' GEMMs run at once: what their tapes keep for later programs comes out of one pool of the run,
    never below empty, and is all back (the results dropped) once the launches end; so are their access plans
    (ADR 0007, "Kept access plans"), from a pool of their own."""
    from kernbench.kernels.library.matmul import matmul as library_matmul
    from kernbench.runtime_api.launch import access_plans
    from kernbench.session import Session

    pool_size = 96 << 10  # less than two launches would keep: the second finds the pool drained
    monkeypatch.setattr(kept_values, "MEMO_BYTES", pool_size)
    seen = []
    take = kept_values.MemoBudget.take

    def watched(budget, size):
        taken = take(budget, size)
        seen.append((id(budget), budget.pool, budget.pool[0], taken))
        return taken

    monkeypatch.setattr(kept_values.MemoBudget, "take", watched)
    session = Session("default", timing_only=True)
    torch = session.torch
    for device in ("ahbm:0", "ahbm:1"):  # enqueued on two devices: both launches run at once
        a, b, c = (torch.empty(256, 256, dtype=torch.float16, device=device) for _ in range(3))
        library_matmul(a, b, c)
    torch.ahbm.synchronize(0), torch.ahbm.synchronize(1)
    pool, plan_pool = session.ctx.replay_memo_pool, session.ctx.access_plan_pool
    assert {id(p) for _, p, _, _ in seen} == {id(pool), id(plan_pool)}  # the run's pools: memos, access plans
    seen = [entry for entry in seen if entry[1] is pool]
    assert len({budget for budget, _, _, _ in seen}) == 2
    assert min(left for _, _, left, _ in seen) >= 0 and any(not taken for *_, taken in seen)
    assert pool == [pool_size] and plan_pool == [access_plans.PLAN_BYTES]  # all given back


@pytest.mark.parametrize("timing_only", [False, True], ids=["values", "timing only"])
def test_adr0007_t102_a_launch_whose_memo_outgrows_its_pool_drops_its_oldest_results_and_replays_exactly(
        monkeypatch, timing_only):
    """A K loop whose pointers of every step cannot all be kept: the oldest remembered results make room for new
    ones (their identities never reused while an entry's key names them), programs look up what is still kept,
    the port calls are the interpretation's, and the pool ends where it began."""
    monkeypatch.setattr(kept_values, "MEMO_BYTES", 24 << 10)
    drops = []
    forget = Tape._forget_items

    def watched(tape, result):
        drops.append(tape._results._budget.pool[0])
        forget(tape, result)

    monkeypatch.setattr(Tape, "_forget_items", watched)
    meta = {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 16, "BLOCK_SIZE_K": 16, "GROUP_SIZE_M": 2}
    results = run_both(_matmul(64, 64, 256), matmul_kernel, (16,), meta, timing_only)
    assert_same(results)
    launch = results[1][2]
    assert drops and launch._traces._reused > 0  # results were dropped, and programs still replayed
    assert min(drops) >= 0
    for tape in launch._traces._tapes:  # every identity a kept key names is an input its entry holds alive
        for (_, key), (_, _, inputs, _) in tape._results.items():
            named = {part for part in key if isinstance(part, int)}
            assert named <= {id(value) for value in inputs}
    launch.finished()
    assert launch._traces.memo_budget.pool == [24 << 10]


# A later launch of each kernel of CASES: the same signature, other tensors, and (where the kernel's Python
# converts none of them) other sizes.
LATER = {
    "vector add": (_vectors(700), (3,)),
    "grouped matmul": (_matmul(40, 48, 40), (9,)),
    "softmax": (_rows(4, 60), (4,)),
    "transposed tiles": (_tiles(2, 8), (2,)),
}


@pytest.mark.parametrize("timing_only", [False, True], ids=["values", "timing only"])
@pytest.mark.parametrize("case", list(CASES))
def test_adr0007_t111_a_later_launch_of_the_signature_replays_the_kept_shapes_with_no_interpretation(
        case, timing_only):
    make, kernel, grid, meta, shapes = CASES[case]
    first = run_both(make, kernel, grid, meta, timing_only, runs=(True,))
    assert first[0][2].interpretations == shapes
    later_make, later_grid = LATER[case]
    results = run_both(later_make, kernel, later_grid, meta, timing_only)
    assert_same(results)
    assert results[1][2].interpretations == 0


@triton.jit
def scaled_steps(x_ptr, out_ptr, steps, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offsets)
    for _ in range(steps):
        x = x * 2.0
    tl.store(out_ptr + offsets, x)


def _steps(n, steps, dtype="f32"):
    def make(memory):
        return memory.from_numpy("x", np.arange(n, dtype=np.float32), dtype), memory.zeros("out", (n,), dtype), steps
    return make


def _filled(block, value):
    def make(memory):
        return (memory.zeros("out", (block,), "f32"),)
    return make


# (first launch, later launch): what differs is a converted scalar, an element type, a constexpr, or a
# constexpr float that equals the first one but is another value (-0.0).
REDONE = {
    "loop trip count": ((_steps(32, 2), scaled_steps, (4,), {"BLOCK": 8}), (_steps(32, 3), scaled_steps, (4,),
                                                                              {"BLOCK": 8})),
    "element type": ((_steps(32, 2), scaled_steps, (4,), {"BLOCK": 8}), (_steps(32, 2, "f16"), scaled_steps, (4,),
                                                                         {"BLOCK": 8})),
    "constexpr": ((_steps(32, 2), scaled_steps, (4,), {"BLOCK": 8}), (_steps(32, 2), scaled_steps, (2,),
                                                                      {"BLOCK": 16})),
    "negative zero": ((_filled(8, 0.0), full_and_zeros_kernel, (2,), {"BLOCK": 8, "VALUE": 0.0}),
                      (_filled(8, -0.0), full_and_zeros_kernel, (2,), {"BLOCK": 8, "VALUE": -0.0})),
}


@pytest.mark.parametrize("timing_only", [False, True], ids=["values", "timing only"])
@pytest.mark.parametrize("case", list(REDONE))
def test_adr0007_t112_a_later_launch_whose_guards_or_signature_differ_is_dry_run_again(case, timing_only):
    (make, kernel, grid, meta), (later_make, later_kernel, later_grid, later_meta) = REDONE[case]
    first = run_both(make, kernel, grid, meta, timing_only, runs=(True,))
    assert first[0][2].interpretations == 1
    results = run_both(later_make, later_kernel, later_grid, later_meta, timing_only)
    assert_same(results)
    assert results[1][2].interpretations == 1
    kept = _kept(kernel.fn)
    assert len(kept) == 2 and len({signature for signature, _ in kept}) == (1 if case == "loop trip count" else 2)


def test_adr0007_t113_a_kernel_keeps_its_most_recently_used_shapes_only():
    """Every launch of another loop trip count is a shape of the same signature: a kernel keeps the 16 most
    recently used, and a launch of a dropped one is dry-run again."""
    for steps in range(kept_shapes.MAX_SHAPES + 2):
        first = run_both(_steps(16, steps), scaled_steps, (2,), {"BLOCK": 8}, runs=(True,))
        assert first[0][2].interpretations == 1
    assert len(_kept(scaled_steps.fn)) == kept_shapes.MAX_SHAPES
    # 2 is the oldest kept until its launch makes it the most recently used: the next two new shapes drop 3 and 4.
    for steps, dry_runs in ((kept_shapes.MAX_SHAPES + 1, 0), (2, 0), (1, 1), (0, 1), (2, 0), (3, 1)):
        results = run_both(_steps(16, steps), scaled_steps, (2,), {"BLOCK": 8})
        assert_same(results)
        assert results[1][2].interpretations == dry_runs, steps


FACTOR = tl.constexpr(2.0)
SHIFT = tl.constexpr(0.0)


@triton.jit
def _times_factor(x):
    return x * FACTOR


@triton.jit
def scaled_by_global(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = _times_factor(tl.load(x_ptr + offsets))
    tl.store(out_ptr + offsets, [x + SHIFT for _ in (0,)][0])


@pytest.mark.parametrize("name, value, factor, shift", [("FACTOR", 3.0, 3.0, 0.0), ("SHIFT", 1.0, 2.0, 1.0)],
                         ids=["read by a called jit function", "read in a comprehension"])
def test_adr0007_t114_a_launch_after_a_global_its_kernel_reads_changed_is_dry_run_again(monkeypatch, name, value,
                                                                                        factor, shift):
    """The interpreter sees a changed global's new value (the kernel stores x * FACTOR + SHIFT), and so does the
    signature the shapes are kept under."""
    make, meta = _vector_pair(32), {"BLOCK": 8}
    assert run_both(make, scaled_by_global, (4,), meta, runs=(True,))[0][2].interpretations == 1
    assert run_both(make, scaled_by_global, (4,), meta, runs=(True,))[0][2].interpretations == 0
    monkeypatch.setattr(sys.modules[__name__], name, tl.constexpr(value))
    results = run_both(make, scaled_by_global, (4,), meta)
    assert_same(results)
    assert results[1][2].interpretations == 1
    program, method, _, (_, _, stored), _ = results[1][0][-1]  # the last program's store: its values, by bytes
    assert (program, method) == ((3, 0, 0), "store")
    assert np.frombuffer(stored, np.float32).tolist() == [factor * i + shift for i in range(24, 32)]
