"""ADR 0008: the cost of Triton kernels on simulated PEs, and where their programs run.

Every expected time is derived here from the topology (latencies, bandwidths,
clock, lanes, flops per cycle), never pasted from a run.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import triton
import triton.language as tl
import yaml

import kernbench
from kernbench.kernels.library.vector_add import add
from kernbench.machine.pe import gemm_ps, vector_ps
from kernbench.runtime_api.errors import WorkingSetTooLarge
from kernbench.session import Session
from tests.runtime_api.closed_forms import PS_PER_S, ceil_div, dma_ps


def kernel_ops(session, kernel: str):
    return session.ctx.machine.oplog.select(label=kernel)


def one_pe_topology(tmp_path: Path) -> Path:
    """The shipped single-SIP machine cut down to one cube with one PE, so every program shares that PE."""
    spec = yaml.safe_load((Path(kernbench.__file__).parent / "configs/topology/single_sip.yaml").read_text())
    spec["sip"]["cube_mesh"] = {"w": 1, "h": 1}
    spec["cube"]["pe_layout"] = {"corners": ["nw"], "pe_per_corner": 1}
    path = tmp_path / "one_pe.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


@triton.jit
def dot_loop(a_ptr, b_ptr, c_ptr, K_ITERS: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """K_ITERS dots of the same A and B tiles: a K loop with no address arithmetic inside it."""
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_ptrs = a_ptr + rm[:, None] * BK + rk[None, :]
    b_ptrs = b_ptr + rk[:, None] * BN + rn[None, :]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for _ in range(K_ITERS):
        acc = tl.dot(tl.load(a_ptrs), tl.load(b_ptrs), acc)
    c_ptrs = c_ptr + tl.program_id(0) * BM * BN + rm[:, None] * BN + rn[None, :]
    tl.store(c_ptrs, acc)


@triton.jit
def load_block(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets))


@triton.jit
def touch(x_ptr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offsets, tl.load(x_ptr + offsets))


def _launch_alone(session, launch):
    """Run `launch(torch)` after every earlier op has finished, so the kernel starts on an idle machine."""
    def bench(torch):
        launch(torch)
        torch.ahbm.synchronize()
    session.run(bench, session.torch)


@pytest.mark.quick
def test_adr0008_t1_single_program_vector_add_is_two_loads_vector_ops_and_a_store():
    session = Session("default")
    topology = session.ctx.topology
    n, block = 1000, 1024

    def launch(torch):
        x, y, out = torch.randn(n, name="x"), torch.randn(n, name="y"), torch.empty(n, name="out")
        torch.ahbm.synchronize()
        add(x, y, out, block_size=block)

    _launch_alone(session, launch)
    ops = kernel_ops(session, "add_kernel")
    # The tensors live whole on cube 0 (PE 0): its one program runs there, so no mesh hop.
    assert {op.unit.split(".")[0] + "." + op.unit.split(".")[1] for op in ops} == {"cube0.pe0"}
    one_dma = dma_ps(topology, n * 4, data_cube=0, pe_cube=0)
    dmas = [op for op in ops if op.kind == "dma"]
    assert [op.end - op.start for op in dmas] == [one_dma] * 3
    # What the bridge announces to the vector unit, read off the kernel: pid * BLOCK (a scalar), arange,
    # + offsets, the mask compare, three pointer adds and x + y.
    vector = [(op.args["op"], op.args["elements"]) for op in ops if op.kind == "vector"]
    assert sorted(vector) == sorted([("mul", 1), ("arange", block), ("add", block), ("cmp", block),
                                     ("addptr", block), ("addptr", block), ("addptr", block), ("add", block)])
    assert all(op.end - op.start == vector_ps(topology, op.args["elements"]) for op in ops if op.kind == "vector")
    # One program blocks on each op, so the ops run back to back and the kernel is their sum.
    assert all(b.start == a.end for a, b in zip(ops, ops[1:]))
    expected = 3 * one_dma + vector_ps(topology, 1) + 7 * vector_ps(topology, block)
    assert ops[-1].end - ops[0].start == expected


@pytest.mark.quick
def test_adr0008_t2_spread_vector_add_reaches_most_of_the_sips_hbm_bandwidth():
    session = Session("default", timing_only=True)
    topology = session.ctx.topology
    n, block = 1 << 20, 4096
    span = []

    def bench(torch):
        spread = torch.DPPolicy(cube="column_wise", pe="column_wise")
        x, y = torch.randn(n, dp=spread, name="x"), torch.randn(n, dp=spread, name="y")
        out = torch.empty(n, dp=spread, name="out")
        torch.ahbm.synchronize()
        start = session.engine.now
        add(x, y, out, block_size=block)
        torch.ahbm.synchronize()
        span.append(session.engine.now - start)

    session.run(bench, session.torch)
    hbm = topology.cube.hbm.bandwidth_bytes_per_s
    # The steady state is HBM-bound: the programs in flight on one cube's PEs, each alone taking its three
    # DMAs and eight vector ops, would ask for more than the stack gives.
    program_bytes = 3 * block * 4
    alone = 3 * dma_ps(topology, block * 4, 0, 0) + vector_ps(topology, 1) + 7 * vector_ps(topology, block)
    in_flight = topology.pes_per_cube * topology.pe.resident_programs
    assert in_flight * program_bytes * PS_PER_S / alone > hbm
    achieved = 3 * n * 4 * PS_PER_S / span[0] / (hbm * topology.cubes_per_sip)
    assert 0.75 <= achieved <= 1.0


@pytest.mark.quick
def test_adr0008_t3_a_dot_loop_loses_exactly_its_unoverlapped_loads(tmp_path):
    session = Session(one_pe_topology(tmp_path), timing_only=True)
    topology = session.ctx.topology
    bm, bn, bk, k_iters = 128, 128, 64, 3

    def launch_on(programs):
        def launch(torch):
            a = torch.randn(bm, bk, dtype="f16", name="A")
            b = torch.randn(bk, bn, dtype="f16", name="B")
            c = torch.empty(programs * bm, bn, name="C")
            torch.ahbm.synchronize()
            dot_loop[(programs,)](a, b, c, K_ITERS=k_iters, BM=bm, BN=bn, BK=bk)
        return launch

    dot = gemm_ps(topology, "f16", 2 * bm * bn * bk)
    loads = dma_ps(topology, bm * bk * 2, 0, 0) + dma_ps(topology, bk * bn * 2, 0, 0)
    _launch_alone(session, launch_on(1))
    gemms = [op for op in kernel_ops(session, "dot_loop") if op.kind == "gemm"]
    # One program: every iteration after the first waits for its own two loads.
    assert gemms[-1].end - gemms[0].start == k_iters * dot + (k_iters - 1) * loads

    assert topology.pe.resident_programs >= 2 and dot >= loads
    session = Session(one_pe_topology(tmp_path), timing_only=True)
    _launch_alone(session, launch_on(2))
    gemms = [op for op in kernel_ops(session, "dot_loop") if op.kind == "gemm"]
    # Two resident programs on one PE: one loads while the other's dot runs, and a dot outlasts the
    # loads, so once the first dot starts the matrix unit never idles.
    assert {op.program for op in gemms} == {0, 1}
    assert gemms[-1].end - gemms[0].start == 2 * k_iters * dot


@pytest.mark.quick
def test_adr0008_t4_a_dot_takes_its_flops_over_the_matrix_units_peak():
    session = Session("default", timing_only=True)
    topology = session.ctx.topology
    bm, bn, bk = 64, 32, 128

    def launch(torch):
        a = torch.randn(bm, bk, dtype="f16", name="A")
        b = torch.randn(bk, bn, dtype="f16", name="B")
        c = torch.empty(bm, bn, name="C")
        dot_loop[(1,)](a, b, c, K_ITERS=1, BM=bm, BN=bn, BK=bk)

    _launch_alone(session, launch)
    (gemm,) = [op for op in kernel_ops(session, "dot_loop") if op.kind == "gemm"]
    flops = 2 * bm * bn * bk
    rate = topology.pe.matrix_unit.rate("f16")
    assert gemm.flops == flops
    assert gemm.end - gemm.start == ceil_div(ceil_div(flops, rate) * PS_PER_S, topology.pe.clock_hz)


@pytest.mark.quick
def test_adr0008_t5_an_op_larger_than_tcm_is_refused_naming_kernel_program_bytes_and_tcm_size():
    session = Session("default", timing_only=True)
    tcm = session.ctx.topology.pe.tcm.capacity_bytes
    block = 2 * tcm // 4  # f32 elements: one load of twice the TCM

    def launch(torch):
        x, out = torch.empty(block, name="x"), torch.empty(block, name="out")
        load_block[(1,)](x, out, BLOCK=block)

    with pytest.raises(WorkingSetTooLarge) as refused:
        _launch_alone(session, launch)
    message = str(refused.value)
    assert f"kernel 'load_block' program 0: a load needs {block * 4} bytes of TCM but a PE has {tcm}" in message


def _pe_of_each_program(session, kernel: str) -> dict[int, str]:
    placed: dict[int, set] = {}
    for op in kernel_ops(session, kernel):
        cube, pe = op.unit.split(".")[:2]
        placed.setdefault(op.program, set()).add(f"{cube}.{pe}")
    assert all(len(pes) == 1 for pes in placed.values()), "a program's ops all run on its PE"
    return {program: pes.pop() for program, pes in sorted(placed.items())}


@pytest.mark.quick
def test_adr0008_t6_programs_go_in_blocks_to_the_owners_of_the_largest_tensor():
    session = Session("default", timing_only=True)
    topology = session.ctx.topology
    owners = topology.pes_per_sip
    programs, block = 2 * owners, 64
    placement = []

    def launch(torch):
        x = torch.empty(programs * block, dp=torch.DPPolicy(cube="column_wise", pe="column_wise"), name="x")
        placement.extend(f"cube{s.cube}.pe{s.pe}" for s in x.placement.shards)
        touch[(programs,)](x, BLOCK=block)

    _launch_alone(session, launch)
    assert _pe_of_each_program(session, "touch") == {p: placement[p * owners // programs] for p in range(programs)}


def test_adr0008_t7_programs_on_a_one_pe_tensor_are_dealt_round_robin_nearest_cube_first():
    session = Session("default", timing_only=True)
    topology = session.ctx.topology
    programs, block = topology.pes_per_sip + 3, 64

    def launch(torch):
        touch[(programs,)](torch.empty(programs * block, name="x"), BLOCK=block)

    _launch_alone(session, launch)
    home = 0  # a tensor without dp= lives whole on cube 0
    cubes = sorted(range(topology.cubes_per_sip), key=lambda c: (len(topology.noc_route(home, c, sip=0)), c))
    order = [f"cube{cube}.pe{pe}" for pe in range(topology.pes_per_cube) for cube in cubes]
    assert _pe_of_each_program(session, "touch") == {p: order[p % len(order)] for p in range(programs)}
