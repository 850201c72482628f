"""`F.scaled_dot_product_attention` as one fused attention kernel forward and one backward (adr/0016-device-ops.md,
"Attention"): numpy's values and gradients, the work of each program, and its time from the topology."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest

from kernbench.machine.pe import gemm_ps, vector_ps
from kernbench.numerics import assert_close
from kernbench.runtime_api.ops import attention
from kernbench.session import Session


def np_attention(q, k, v, grad, causal=False, mask=None, repeat=1, scale=None, kept=1.0):
    """Attention and its gradients of q, k and v in float64, key and value heads shared by `repeat` query heads,
    the probabilities scaled by `kept` (dropout's 1/(1 − p) where kept, 0 where dropped)."""
    k, v = np.repeat(k, repeat, axis=-3), np.repeat(v, repeat, axis=-3)
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = q @ np.swapaxes(k, -1, -2) * scale
    if causal:
        scores = np.where(np.tril(np.ones(scores.shape[-2:], bool)), scores, -np.inf)
    if mask is not None:
        scores = np.where(mask, scores, -np.inf) if mask.dtype == bool else scores + mask
    probs = np.exp(scores - scores.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    grad_probs = (grad @ np.swapaxes(v, -1, -2)) * kept
    grad_scores = probs * (grad_probs - (grad_probs * probs).sum(-1, keepdims=True))
    dq, dk = grad_scores @ k * scale, np.swapaxes(grad_scores, -1, -2) @ q * scale
    dv = np.swapaxes(probs * kept, -1, -2) @ grad

    def grouped(x):
        return x.reshape(*x.shape[:-3], -1, repeat, *x.shape[-2:]).sum(-3)

    return (probs * kept) @ v, dq, grouped(dk), grouped(dv)


CASES = {  # name: (query heads, key heads, L, S, E, Ev, causal, mask kind)
    "plain": (4, 4, 200, 300, 16, 8, False, None),
    "causal": (2, 2, 300, 300, 16, 16, True, None),
    "causal_short_keys": (2, 2, 260, 130, 8, 8, True, None),
    "bool_mask": (2, 2, 130, 70, 16, 16, False, "bool"),
    "float_mask": (4, 4, 64, 200, 16, 8, False, "float"),
    "grouped_query": (4, 2, 150, 150, 16, 16, True, None),
}


def _run_attention(case, dtype: str, seed: int = 0):
    heads, kv_heads, length, keys, width, value_width, causal, mask_kind = CASES[case]
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((2, heads, length, width))
    k = rng.standard_normal((2, kv_heads, keys, width))
    v = rng.standard_normal((2, kv_heads, keys, value_width))
    grad = rng.standard_normal((2, heads, length, value_width))
    mask = None
    if mask_kind == "bool":
        mask = rng.random((length, keys)) > 0.3
        mask[:, 0] = True
    elif mask_kind == "float":
        mask = rng.standard_normal((heads, length, keys))
    got = {}

    def bench(torch):
        kind = getattr(torch, {"f32": "float32", "f16": "float16"}[dtype])
        tq, tk, tv = (torch.tensor(a, dtype=kind, device="cuda", requires_grad=True) for a in (q, k, v))
        tm = None if mask is None else torch.tensor(mask, device="cuda",
                                                    dtype=torch.bool if mask.dtype == bool else kind)
        out = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, attn_mask=tm, is_causal=causal,
                                                               enable_gqa=kv_heads != heads)
        out.backward(torch.tensor(grad, dtype=kind, device="cuda"))
        got.update(out=out.numpy(), dq=tq.grad.numpy(), dk=tk.grad.numpy(), dv=tv.grad.numpy())

    session = Session("h200x4")
    session.run(bench, session.torch)
    cast = np.float16 if dtype == "f16" else np.float64
    inputs = [a.astype(cast).astype(np.float64) for a in (q, k, v, grad)]
    want = np_attention(*inputs, causal=causal, mask=mask, repeat=heads // kv_heads)
    return (got["out"], got["dq"], got["dk"], got["dv"]), want


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_adr0016_t160_fused_attention_gives_numpys_values_and_gradients(case, dtype):
    got, want = _run_attention(case, dtype)
    for name, a, b in zip(("out", "dq", "dk", "dv"), got, want):
        assert a.shape == b.shape, name
        assert_close(a, b, dtype)


def test_adr0016_t160_fused_dropout_draws_the_run_generator_and_is_exact():
    """With dropout the fused kernel draws the calling rank's generator of the device once over (B, H, L, S), as
    the unfused dropout draws it: a seeded run keeps the scores whose draw is at least p, and its values and
    gradients are numpy's with that mask; the same seed gives the same values."""
    rng = np.random.default_rng(3)
    q, k, v, grad = (rng.standard_normal((2, 2, 150, 8)) for _ in range(4))
    runs = []
    for _ in range(2):
        got = {}

        def bench(torch):
            torch.manual_seed(11)
            tq, tk, tv = (torch.tensor(a, dtype=torch.float32, device="cuda", requires_grad=True) for a in (q, k, v))
            got["draws"] = copy.deepcopy(session.ctx.rng_for(None, tq.device)).random((2, 2, 150, 150)).astype(
                np.float32)
            out = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, dropout_p=0.3, is_causal=True)
            out.backward(torch.tensor(grad, dtype=torch.float32, device="cuda"))
            got.update(out=out.numpy(), dq=tq.grad.numpy(), dk=tk.grad.numpy(), dv=tv.grad.numpy())

        session = Session("h200x4")
        session.run(bench, session.torch)
        runs.append(got)
    first, second = runs
    kept = np.where(first["draws"] >= 0.3, 1 / 0.7, 0.0)
    want = np_attention(q, k, v, grad, causal=True, kept=kept)
    for name, expected in zip(("out", "dq", "dk", "dv"), want):
        assert_close(first[name], expected, "f32")
        assert np.array_equal(first[name], second[name])


def _logged(topology: str, batch, length: int, keys: int, width: int, causal: bool, backward: bool = False,
            dropout: float = 0.0):
    """The op-log records of one attention call (or its backward) on an idle machine, timing-only."""
    session = Session(topology, timing_only=True)
    got = {}

    def bench(torch):
        q = torch.randn(*batch, length, width, device="cuda", dtype=torch.bfloat16, requires_grad=backward)
        k, v = (torch.randn(*batch, keys, width, device="cuda", dtype=torch.bfloat16, requires_grad=backward)
                for _ in range(2))
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal, dropout_p=dropout)
        torch.cuda.synchronize()
        first = len(session.ctx.machine.oplog)
        if backward:
            out.backward(torch.ones_like(out))
        else:
            torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal, dropout_p=dropout)
        torch.cuda.synchronize()
        got["records"] = list(session.ctx.machine.oplog)[first:]

    session.run(bench, session.torch)
    return got["records"], session.ctx.topology


@pytest.mark.parametrize("causal,dropout", [(False, 0.0), (True, 0.0), (True, 0.2)])
def test_adr0016_t161_a_forward_program_is_its_blocks_flops_and_softmax_passes_and_stores_o_and_logsumexp(
        causal, dropout):
    """A program per 128 query rows: Q Kᵀ and P V over the keys it sees (all, or up to the diagonal under
    is_causal: 4·Σ rows·keys·E flops in all, about half), the softmax's vector passes over those scores (and the
    dropout's draws), and O and the logsumexp stored once — no score matrix goes through HBM."""
    batch, length, width = (2, 3), 640, 64
    records, _ = _logged("h200x4", batch, length, length, width, causal, dropout=dropout)
    passes = attention.FORWARD_PASSES + (attention.DROPOUT_PASSES if dropout else 0)
    name = "scaled_dot_product_attention"
    blocks = [range(start, min(length, start + attention.BLOCK_M)) for start in range(0, length, attention.BLOCK_M)]
    seen = [(len(rows), rows.stop if causal else length) for rows in blocks]
    gemms = [r for r in records if r.kind == "gemm"]
    assert {r.label for r in gemms} == {name} and len(gemms) == 2 * 6 * len(blocks)
    assert sum(r.flops for r in gemms) == 6 * sum(4 * rows * keys * width for rows, keys in seen)
    vector = [r for r in records if r.kind == "vector"]
    assert sum(r.args["elements"] for r in vector) == 6 * sum(passes * rows * keys for rows, keys in seen)
    stored = sum(r.nbytes for r in records if r.kind == "dma" and r.args.get("dst", "").endswith("hbm"))
    assert stored == 6 * length * (width * 2 + 4)


def test_adr0016_t161_a_backward_program_per_key_block_runs_five_products_and_adds_its_dq_with_atomics():
    """A program per 128 keys over the queries that see them: S, dP, dV, dK and dQ (10·Σ queries·keys·E flops),
    `BACKWARD_PASSES` vector passes over the scores, dK and dV stored, dQ added into a zeroed fp32 accumulator
    and converted by a second launch."""
    batch, length, width = (1, 2), 384, 64
    records, _ = _logged("h200x4", batch, length, length, width, True, backward=True)
    kernel = [r for r in records if r.label == "scaled_dot_product_attention_backward"]
    starts = [range(start, min(length, start + attention.BLOCK_N)) for start in range(0, length, attention.BLOCK_N)]
    seen = [(length - cols.start, len(cols)) for cols in starts]
    gemms = [r for r in kernel if r.kind == "gemm"]
    assert sum(r.flops for r in gemms) == 2 * sum(10 * queries * keys * width for queries, keys in seen)
    passes = [r for r in kernel if r.kind == "vector" and r.args["op"] == "attention backward"]
    assert sum(r.args["elements"] for r in passes) == 2 * sum(
        attention.BACKWARD_PASSES * queries * keys + queries * width for queries, keys in seen)
    assert {r.args["op"] for r in kernel if r.kind == "vector"} == {"attention backward", "sum_partials"}
    assert any(r.label == "zeros" for r in records)


def test_adr0016_t162_one_program_takes_its_closed_form_on_an_idle_machine():
    """One program (128 queries, 2048 keys, E 128) on an idle h200x4: its first stage's loads, then Q Kᵀ, the
    softmax's passes and P V back to back, each its flops over the matrix unit or its elements over the lanes,
    the later stages' loads beside them, and its stores once they are done."""
    length, keys, width = 128, 2048, 128
    records, topology = _logged("h200x4", (1, 1), length, keys, width, False)
    compute = sorted((r for r in records if r.kind in ("gemm", "vector")), key=lambda r: r.start)
    assert [r.kind for r in compute] == ["gemm", "vector", "gemm"]
    want = [gemm_ps(topology, "bf16", 2 * length * keys * width),
            vector_ps(topology, attention.FORWARD_PASSES * length * keys),
            gemm_ps(topology, "bf16", 2 * length * keys * width)]
    assert [r.end - r.start for r in compute] == want
    assert all(b.start == a.end for a, b in zip(compute, compute[1:]))
    loads = [r for r in records if r.kind == "dma" and r.args.get("dst", "").endswith("tcm")]
    first_stage = [r for r in loads if r.start < compute[0].start]
    assert compute[0].start == max(r.end for r in first_stage)
    assert max(r.end for r in loads) <= compute[-1].end
    stores = [r for r in records if r.kind == "dma" and r.args.get("dst", "").endswith("hbm")]
    assert min(r.start for r in stores) == compute[-1].end


@pytest.mark.parametrize("causal", [False, True])
def test_adr0016_t163_programs_take_turns_at_a_pes_compute_and_each_pe_takes_an_sms_round_robin_tiles(causal):
    """The forward's MMAs and softmax passes all hold a PE's matrix unit, so the programs resident on one PE take
    turns at them (never overlapping) while their loads run beside; each PE's tiles are those a persistent
    kernel gives an SM (tile t to SM t mod P), so its busy time is the sum of those tiles' closed forms."""
    batch, length, width = (4, 16), 1024, 64
    records, topology = _logged("h200x4", batch, length, length, width, causal)
    per_pe: dict[str, list] = {}
    for r in records:
        if r.kind in ("gemm", "vector"):
            assert r.unit.endswith("matrix")
            per_pe.setdefault(r.unit, []).append(r)
    pes = topology.pes_per_sip
    assert len(per_pe) == pes
    for ops in per_pe.values():
        ops.sort(key=lambda r: r.start)
        assert all(b.start >= a.end for a, b in zip(ops, ops[1:]))
    blocks = length // attention.BLOCK_M

    def tile_ps(tile: int) -> int:
        keys = (tile % blocks + 1) * attention.BLOCK_M if causal else length
        return (2 * gemm_ps(topology, "bf16", 2 * attention.BLOCK_M * keys * width)
                + vector_ps(topology, attention.FORWARD_PASSES * attention.BLOCK_M * keys))

    tiles = 16 * 4 * blocks
    want = sorted(sum(tile_ps(t) for t in range(sm, tiles, pes)) for sm in range(pes))
    assert sorted(sum(r.end - r.start for r in ops) for ops in per_pe.values()) == want


def test_adr0016_t164_aligned_runs_cover_a_range_in_power_of_two_runs_aligned_to_their_length():
    assert attention.aligned_runs(range(64, 1152)) == [range(64, 128), range(128, 256), range(256, 512),
                                                      range(512, 1024), range(1024, 1152)]
    for start, stop in [(0, 1), (3, 100), (128, 4096), (5, 5), (0, 4096)]:
        runs = attention.aligned_runs(range(start, stop))
        assert [i for run in runs for i in run] == list(range(start, stop))
        assert all(len(run) & (len(run) - 1) == 0 and run.start % len(run) == 0 for run in runs)


def test_adr0016_t165_attention_operands_that_do_not_fit_are_one_line_in_torchs_words():
    def bench(torch):
        F = torch.nn.functional
        q = torch.randn(1, 2, 4, 8, device="cuda")
        messages = []
        for call in (lambda: F.scaled_dot_product_attention(q, q.half(), q),
                     lambda: F.scaled_dot_product_attention(q, torch.randn(1, 2, 4, 6, device="cuda"), q),
                     lambda: F.scaled_dot_product_attention(q, q, q, attn_mask=torch.ones(4, 4, device="cuda"),
                                                            is_causal=True),
                     lambda: F.scaled_dot_product_attention(q, torch.randn(1, 3, 4, 8, device="cuda"),
                                                            torch.randn(1, 3, 4, 8, device="cuda"), enable_gqa=True),
                     lambda: F.scaled_dot_product_attention(q, q, q, attn_mask=torch.ones(3, 4, device="cuda"))):
            with pytest.raises(Exception) as caught:
                call()
            messages.append(str(caught.value))
        return messages

    session = Session("h200x4")
    out = {}
    session.run(lambda torch: out.update(messages=bench(torch)), session.torch)
    dtype, width, causal, groups, mask = out["messages"]
    assert dtype.startswith("Expected query, key, and value to have the same dtype")
    assert "share E" in width and "should not be set when is_causal=True" in causal
    assert "multiple of the key and value heads" in groups and "cannot be broadcast" in mask
    assert all("\n" not in message for message in out["messages"])
