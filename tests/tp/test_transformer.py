"""ADR 0011: the tensor-parallel transformer layer — numpy forward, tp-invariant gradients, the training-step bench."""

from __future__ import annotations

import numpy as np
import pytest

from kernbench.errors import KernbenchError
from kernbench.numerics import assert_close
from kernbench.session import Session
from kernbench.tp import finalize_model_grads, parallel_state
from kernbench.tp.config import TransformerConfig
from kernbench.tp.transformer import TransformerLayer
from tests.tp.harness import run_tensor_parallel

SEQ, BATCH, HIDDEN, HEADS = 8, 2, 32, 4


def _input():
    return np.random.default_rng(7).standard_normal((SEQ, BATCH, HIDDEN)).astype(np.float32)


def _layer_norm(x):
    return (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)


def _reference(x, w):
    """The layer in numpy from its full (unpartitioned) weights `w`."""
    s, b, h = x.shape
    d = h // HEADS
    qkv = _layer_norm(x) @ w["qkv"].T + w["qkv_b"]
    q, k, v = (part.transpose(1, 2, 0, 3) for part in np.split(qkv.reshape(s, b, HEADS, 3 * d), 3, axis=-1))
    scores = q @ k.swapaxes(-1, -2) / np.sqrt(d) + np.triu(np.full((s, s), -np.inf), 1)
    probs = np.exp(scores - scores.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    context = (probs @ v).transpose(2, 0, 1, 3).reshape(s, b, h)
    hidden = x + context @ w["proj"].T + w["proj_b"]
    a = _layer_norm(hidden) @ w["fc1"].T + w["fc1_b"]
    gelu = 0.5 * a * (1 + np.tanh(0.79788456 * (a + 0.044715 * a ** 3)))
    return hidden + gelu @ w["fc2"].T + w["fc2_b"]


def _step(sequence_parallel: bool, overlap: bool = False):
    x = _input()

    def step(torch, rank):
        tp = parallel_state.get_tensor_model_parallel_world_size()
        tp_rank = parallel_state.get_tensor_model_parallel_rank()
        config = TransformerConfig(num_layers=1, hidden_size=HIDDEN, num_attention_heads=HEADS,
                                   params_dtype=torch.float32, sequence_parallel=sequence_parallel,
                                   tp_comm_overlap=overlap)
        layer = TransformerLayer(config)
        rows = slice(tp_rank * SEQ // tp, (tp_rank + 1) * SEQ // tp) if sequence_parallel and tp > 1 else slice(None)
        hidden = torch.tensor(x[rows]).requires_grad_()
        torch.ahbm.synchronize()
        start, end = torch.ahbm.Event(enable_timing=True), torch.ahbm.Event(enable_timing=True)
        start.record()
        out = layer(hidden)
        out.square().sum().backward()
        end.record()
        end.synchronize()
        finalize_model_grads(layer)
        replicated = {"ln1": layer.input_layernorm, "ln2": layer.pre_mlp_layernorm,
                      "proj_b": (layer.self_attention.linear_proj.bias,), "fc2_b": (layer.mlp.linear_fc2.bias,)}
        linears = {"qkv": layer.self_attention.linear_qkv, "proj": layer.self_attention.linear_proj,
                   "fc1": layer.mlp.linear_fc1, "fc2": layer.mlp.linear_fc2}
        return {"out": out.numpy(), "dx": hidden.grad.numpy(), "rows": rows, "tp": tp, "tp_rank": tp_rank,
                "step_ms": start.elapsed_time(end),
                **{name: linear.weight.numpy() for name, linear in linears.items()},
                **{name + "_b": linear.bias.numpy() for name, linear in linears.items()},
                **{"d" + name: linear.weight.grad.numpy() for name, linear in linears.items()},
                **{f"d{name}{i}": p.grad.numpy() for name, ps in replicated.items() for i, p in enumerate(ps)}}

    return step


def test_adr0011_t43_the_layer_forward_is_the_numpy_transformer_layer():
    result = run_tensor_parallel(1, _step(False))[0]
    weights = {name: result[name] for name in ("qkv", "qkv_b", "proj", "proj_b", "fc1", "fc1_b", "fc2", "fc2_b")}
    assert_close(result["out"], _reference(_input(), weights), "f32")


@pytest.mark.parametrize("tp, sequence_parallel", [(2, False), (4, False), (2, True), (4, True)])
def test_adr0011_t44_gradients_do_not_depend_on_the_tensor_parallel_size(tp, sequence_parallel):
    """Input and weight gradients at tp > 1 (with and without sequence parallelism) are tp 1's, partitioned.

    Column-parallel weights split by output rows — for QKV, by head, each head's [q k v] rows together — and
    row-parallel ones by input columns, as Megatron lays them out.
    """
    single = run_tensor_parallel(1, _step(False))[0]
    for got in run_tensor_parallel(tp, _step(sequence_parallel)).values():
        part, rows = got["tp_rank"], got["rows"]
        assert_close(got["dx"], single["dx"][rows], "f32")
        assert_close(got["dfc1"], np.split(single["dfc1"], tp, axis=0)[part], "f32")
        assert_close(got["dfc2"], np.split(single["dfc2"], tp, axis=1)[part], "f32")
        assert_close(got["dproj"], np.split(single["dproj"], tp, axis=1)[part], "f32")
        assert_close(got["dqkv"], np.split(single["dqkv"], tp, axis=0)[part], "f32")
        # Replicated parameters: whole on every rank once finalize_model_grads has summed the sequence slices'
        # partial gradients over the tensor-parallel group (and averaged the identical data-parallel replicas).
        for name in ("dln10", "dln11", "dln20", "dln21", "dproj_b0", "dfc2_b0"):
            assert_close(got[name], single[name], "f32")


@pytest.mark.parametrize("tp, sequence_parallel", [(2, False), (4, False), (2, True), (4, True)])
def test_adr0011_t47_tp_comm_overlap_gives_the_same_numbers_in_a_shorter_step(tp, sequence_parallel):
    """Megatron's overlap: the column-parallel backward's all-reduce (reduce-scatter with sequence parallelism)
    runs beside the weight-gradient GEMM; every value is bit for bit the serial run's, the step is shorter."""
    serial = run_tensor_parallel(tp, _step(sequence_parallel))
    overlapped = run_tensor_parallel(tp, _step(sequence_parallel, overlap=True))
    for rank, got in overlapped.items():
        for name, value in serial[rank].items():
            if isinstance(value, np.ndarray):
                assert np.array_equal(got[name], value), name
        assert got["step_ms"] < serial[rank]["step_ms"]


def test_adr0011_t45_the_bench_exposed_communication_is_the_collectives_records(capsys):
    from kernbench.benches import tp_layer

    session = Session("default")
    session.run(tp_layer.run, session.torch, ["--hidden", "64", "--heads", "4", "--seq", "16", "--tp", "2",
                                              "--sp", "off", "--overlap", "off"])
    row = capsys.readouterr().out.splitlines()[2].split()
    step, compute, communication = (float(row[i]) for i in (4, 6, 8))
    assert row[:4] == ["2", "2", "off", "off"] and step == pytest.approx(compute + communication, abs=2e-3)
    rank0 = [record["time_ps"] for record in session.ctx.collectives if 0 in record["ranks"]]
    assert communication == pytest.approx(sum(rank0) / 1e6, abs=1e-3)


def test_adr0011_t108_the_bench_runs_tp_times_dp_ranks_and_names_a_world_that_does_not_fit(capsys):
    """`--dp 1` at tp 2 on the default machine's 4 SIPs: two ranks, SIPs 2 and 3 idle, and with no data
    parallelism every collective of rank 0 is its tensor-parallel group's; tp 4 x dp 2 = 8 ranks do not fit."""
    from kernbench.benches import tp_layer

    session = Session("default", timing_only=True)
    session.run(tp_layer.run, session.torch, ["--hidden", "64", "--heads", "4", "--seq", "16", "--tp", "2",
                                              "--dp", "1", "--sp", "off", "--overlap", "off"])
    row = capsys.readouterr().out.splitlines()[2].split()
    assert row[:4] == ["2", "1", "off", "off"]
    assert {op.device for op in session.ctx.machine.oplog} == {"sip0", "sip1"}
    assert {tuple(record["ranks"]) for record in session.ctx.collectives} == {(0, 1)}
    refused = Session("default", timing_only=True)
    with pytest.raises(KernbenchError, match=r"--tp 4 x --dp 2 ranks do not fit the 4 SIPs"):
        refused.run(tp_layer.run, refused.torch, ["--tp", "4", "--dp", "2"])


def test_adr0011_t48_the_bench_shows_the_overlap_hiding_communication(capsys):
    # With the overlap the column-parallel backward's collectives run beside the weight-gradient GEMMs: the
    # same collectives, less of their time exposed, a shorter step; each row still adds up.
    from kernbench.benches import tp_layer

    session = Session("default", timing_only=True)
    session.run(tp_layer.run, session.torch, ["--hidden", "256", "--heads", "4", "--seq", "64", "--tp", "4",
                                              "--sp", "off,on", "--overlap", "off,on"])
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[2:6]]
    assert [row[:4] for row in rows] == [["4", "1", "off", "off"], ["4", "1", "off", "on"], ["4", "1", "on", "off"],
                                         ["4", "1", "on", "on"]]
    for serial, overlapped in (rows[0], rows[1]), (rows[2], rows[3]):
        step, compute, exposed = (float(serial[i]) for i in (4, 6, 8))
        step_on, compute_on, exposed_on = (float(overlapped[i]) for i in (4, 6, 8))
        assert step_on == pytest.approx(compute_on + exposed_on, abs=2e-3)
        assert exposed_on < exposed and step_on < step


def test_adr0011_t50_a_tp1_training_step_is_the_sum_of_its_ops_closed_forms():
    """At tp = 1, widths where each op is one program on one PE: the step (forward and backward) is its op log's
    ops end to end, no gap and no overlap, and each op takes its closed form from the topology — a vector op
    ceil(n / lanes) cycles, a matrix op ceil(flops / rate) cycles, a DMA between HBM and a TCM Σ latency +
    bytes over the slowest hop (with the PE's DMA engine), a fill or copy in HBM its latency + bytes at its
    rate, the host's copy over the host link. So nothing in a step costs what its ops do not."""
    from tests.runtime_api.closed_forms import PS_PER_S, ceil_div, dma_ps, host_to_cube_path

    session = Session("single_sip")
    topology = session.ctx.topology
    window = {}

    def bench(torch):
        parallel_state.initialize_model_parallel(1, torch=torch)
        config = TransformerConfig(num_layers=1, hidden_size=8, num_attention_heads=1,
                                   params_dtype=torch.float32)
        layer = TransformerLayer(config)
        hidden = torch.tensor(np.random.default_rng(3).standard_normal((4, 1, 8)).astype(np.float32))
        hidden.requires_grad_()
        torch.ahbm.synchronize()
        start, end = torch.ahbm.Event(enable_timing=True), torch.ahbm.Event(enable_timing=True)
        start.record()
        layer(hidden).square().sum().backward()
        end.record()
        end.synchronize()
        window["ps"] = (start.time_ps, end.time_ps)

    session.run(bench, session.torch)
    first, last = window["ps"]
    ops = sorted((op for op in session.ctx.machine.oplog if first <= op.start < last), key=lambda op: op.start)
    assert not [op for op in session.ctx.machine.oplog if op.start < first < op.end or op.start < last < op.end]
    assert {op.kind for op in ops} == {"dma", "vector", "gemm"} and len(ops) > 300

    def cycles(count: int) -> int:
        return ceil_div(count * PS_PER_S, topology.pe.clock_hz)

    def closed_form(op) -> int:
        if op.kind == "vector":
            return cycles(ceil_div(op.args["elements"], topology.pe.vector_unit.lanes))
        if op.kind == "gemm":
            flops = 2 * op.args["m"] * op.args["n"] * op.args["k"]
            return cycles(ceil_div(flops, topology.pe.matrix_unit.rate(op.args["dtype"])))
        src, dst = op.args["src"], op.args["dst"]
        if src.endswith(".tcm") or dst.endswith(".tcm"):  # a PE's load or store, in cube 0 where the tensors are
            return dma_ps(topology, op.nbytes, 0, 0)
        if src == "host":
            latency, bandwidth = host_to_cube_path(topology, 0, 0)
            return latency + ceil_div(op.nbytes * PS_PER_S, bandwidth)
        hbm = topology.cube.hbm  # a fill (src "generated") or a copy within cube 0's HBM
        return hbm.latency_ps + ceil_div(op.nbytes * PS_PER_S, hbm.bandwidth_bytes_per_s)

    at = first
    for op in ops:
        assert op.start == at, f"{op.kind} {op.label} starts at {op.start}, the previous op ended at {at}"
        assert op.end - op.start == closed_form(op), op
        at = op.end
    assert at == last  # the step is the sum of its ops' closed forms
