"""ADR 0011: the tensor-parallel MLP (column h->4h, GELU, row 4h->h) against numpy, and the bench."""

from __future__ import annotations

import numpy as np
import pytest

from kernbench.numerics import assert_close
from kernbench.session import Session
from kernbench.tp import ColumnParallelLinear, RowParallelLinear, kernels
from tests.tp.harness import TP_SIZES, mlp_reference, random_f16, run_tensor_parallel

TOKENS, HIDDEN, FFN = 40, 96, 384


def mlp_problem():
    rng = np.random.default_rng(20)
    return (random_f16(rng, TOKENS, HIDDEN), random_f16(rng, FFN, HIDDEN, scale=HIDDEN ** -0.5),
            random_f16(rng, FFN), random_f16(rng, HIDDEN, FFN, scale=FFN ** -0.5), random_f16(rng, HIDDEN))


def run_mlp(tp: int) -> dict:
    x, w1, b1, w2, b2 = mlp_problem()

    def mlp(torch, rank):
        fc1 = ColumnParallelLinear(HIDDEN, FFN, skip_bias_add=True)
        fc1.load_full_weight(w1, b1)
        fc2 = RowParallelLinear(FFN, HIDDEN, input_is_parallel=True)
        fc2.load_full_weight(w2, b2)
        intermediate, bias = fc1(torch.tensor(x, dtype="f16"))
        output, _ = fc2(kernels.bias_gelu(intermediate, bias, intermediate))
        return output.numpy()

    return run_tensor_parallel(tp, mlp)


@pytest.mark.parametrize("tp", TP_SIZES)
def test_adr0011_t20_mlp_matches_the_unsharded_numpy_mlp(tp):
    expected = mlp_reference(*mlp_problem())
    for output in run_mlp(tp).values():
        assert_close(output, expected, "f16")


@pytest.mark.parametrize("tp", [2, 4])
def test_adr0011_t21_ranks_agree_bit_for_bit_after_the_all_reduce(tp):
    outputs = run_mlp(tp)
    assert len(outputs) == 4
    for rank, output in outputs.items():
        np.testing.assert_array_equal(output, outputs[0], err_msg=f"rank {rank}")


def test_adr0011_t22_bench_checks_itself_and_prints_the_breakdown(monkeypatch, capsys):
    from kernbench.benches import tp_mlp

    monkeypatch.setenv("KERNBENCH_HIDDEN", "64")
    monkeypatch.setenv("KERNBENCH_TOKENS", "32")
    session = Session("default")
    session.run(tp_mlp.run, session.torch)
    printed = capsys.readouterr().out
    assert "tokens=32 hidden=64 ffn=256 tp=4 dp=1" in printed
    for phase in ("gemm", "elementwise", "all-reduce", "total", "TFLOP/s", "all 4 ranks agree"):
        assert phase in printed


@pytest.mark.parametrize("tp", [2, 4])
def test_adr0011_t28_the_benchs_all_reduce_time_is_the_collectives_own(tp):
    from kernbench.benches import tp_mlp

    session = Session("default")
    phases = session.run(tp_mlp.mlp_phases, session.torch, tp, 32, 64)
    # Rank 0's all-reduce: the one collective of its tensor-parallel group (ranks 0..tp-1), of tokens x hidden f16.
    rank0 = [row for row in session.ctx.collectives if row["ranks"] == list(range(tp))]
    assert [(row["collective"], row["bytes"]) for row in rank0] == [("all_reduce", 32 * 64 * 2)]
    assert phases["all-reduce"] == rank0[0]["time_ps"] == rank0[0]["end_ps"] - rank0[0]["start_ps"] > 0


def test_adr0011_t109_the_benchs_bias_kernels_run_in_the_block_a_library_picks():
    """tp_mlp's in-place bias kernels take their block as the layers' do (`fusions.elementwise_block_of`). At tp 1,
    128 tokens and hidden 128, GELU runs over 128 x 512 = 65 536 elements a rank: Triton's 1024 would make 64
    programs, and 2048 (input, bias and output elements, 6 bytes each, far inside a quarter of the 1 MiB TCM)
    still gives each of a default SIP's 32 PEs a program, so 32 run; the bias add over 128 x 128 = 16 384 keeps
    1024 (16 programs: a larger block would leave PEs idle)."""
    from kernbench.benches import tp_mlp

    session = Session("default")
    session.run(tp_mlp.mlp_phases, session.torch, 1, 128, 128)
    assert session.ctx.topology.pes_per_sip == 32
    oplog = session.ctx.machine.oplog
    for kernel, programs in (("bias_gelu_kernel", 32), ("add_bias_kernel", 16)):
        for sip in range(4):
            ops = [op for op in oplog.select(label=kernel) if op.device == f"sip{sip}"]
            assert len({op.program for op in ops}) == programs, (kernel, sip)
