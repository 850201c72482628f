"""Triton's tutorials 01 to 06 run on kernbench as written, checked against numpy.

Each tutorial module here holds the tutorial's kernels unchanged and its host
code with `torch` being the running session's (see each module's header).
The host code runs inside `Session.run` on the default topology, at small
sizes, with Triton's active driver answering from the simulated machine; the
references are computed in float64 numpy from the very inputs the session
generated, and compared with the per-dtype tolerance.
"""

from __future__ import annotations

import numpy as np
import pytest
import triton
from tutorial_torch import import_tutorial, tutorial_driver

from kernbench.numerics import assert_close
from kernbench.session import Session
from tests.philox_reference import reference_blocks


@pytest.fixture
def tutorial():
    with tutorial_driver():
        yield import_tutorial


def run_strict(bench, *args):
    """Run `bench(torch, *args)` in a fresh default session that stops at the first data hazard."""
    session = Session("default", strict_hazards=True)
    return session.run(bench, session.torch, *args), session


def wide(*tensors):
    return [t.numpy().astype(np.float64) for t in tensors]


def test_adr0007_t50_tutorial_01_vector_add(tutorial):
    t = tutorial("triton_01_vector_add")

    def bench(torch):
        torch.manual_seed(0)
        size = 4099
        x = torch.rand(size, device=t.DEVICE)
        y = torch.rand(size, device=t.DEVICE)
        output_triton = t.add(x, y)
        return wide(x, y, output_triton)

    (x, y, out), _ = run_strict(bench)
    assert_close(out, x + y, "f32")


def test_adr0007_t51_tutorial_02_fused_softmax_sizes_its_persistent_grid_from_warmup(tutorial):
    t = tutorial("triton_02_fused_softmax")

    def bench(torch):
        torch.manual_seed(0)
        x = torch.randn(301, 781, device=t.DEVICE)
        y_triton = t.softmax(x)
        return wide(x, y_triton)

    (x, y), session = run_strict(bench)
    expected = np.exp(x - x.max(axis=1, keepdims=True))
    assert_close(y, expected / expected.sum(axis=1, keepdims=True), "f32")
    topology = session.ctx.topology
    assert session.ctx.programs_done == topology.pes_per_sip * topology.pe.resident_programs


@pytest.mark.parametrize("activation", ["", "leaky_relu"])
def test_adr0007_t52_tutorial_03_autotuned_matmul(tutorial, activation):
    t = tutorial("triton_03_matrix_multiplication")

    def bench(torch):
        torch.manual_seed(0)
        a = torch.rand((96, 80), device=t.DEVICE, dtype=torch.float16) - 0.5
        b = torch.rand((80, 72), device=t.DEVICE, dtype=torch.float16) - 0.5
        triton_output = t.matmul(a, b, activation)
        return wide(a, b, triton_output)

    (a, b, c), _ = run_strict(bench)
    expected = a @ b
    if activation:
        expected = np.where(expected >= 0, expected, 0.01 * expected)
    assert_close(c, expected, "f16")


def test_adr0007_t120_tutorial_04_seeded_dropout_draws_tritons_philox_numbers(tutorial):
    t = tutorial("triton_04_low_memory_dropout")
    p, size = 0.5, 3000

    def bench(torch):
        torch.manual_seed(0)
        x = torch.randn(size=(size, ), device=t.DEVICE)
        x_keep = (torch.rand(size=(size, ), device=t.DEVICE) > p).to(torch.int32)
        start, end = torch.ahbm.Event(enable_timing=True), torch.ahbm.Event(enable_timing=True)
        start.record()
        outputs = [t.seeded_dropout(x, p=0.5, seed=seed) for seed in (123, 123, 512)]
        end.record()
        end.synchronize()
        outputs.append(t.dropout(x, x_keep=x_keep, p=p))
        return start.elapsed_time(end), None if torch.is_timing_only() else wide(x, x_keep, *outputs)

    elapsed, (x, x_keep, same, again, other, baseline) = run_strict(bench)[0]
    for seed, got in ((123, same), (123, again), (512, other)):
        _, uniform, _ = reference_blocks(seed, np.arange(triton.cdiv(size, 1024) * 1024))
        assert_close(got, np.where(uniform[:size] > p, x / (1 - p), 0.0), "f32")
    assert (same == again).all() and (same != other).any()
    assert_close(baseline, np.where(x_keep != 0, x / (1 - p), 0.0), "f32")
    timing_only = Session("default", strict_hazards=True, timing_only=True)
    assert timing_only.run(bench, timing_only.torch)[0] == elapsed  # the same simulated time without values


def _layer_norm_reference(x, w, b, dy, eps):
    mean = x.mean(axis=1, keepdims=True)
    rstd = 1 / np.sqrt(x.var(axis=1, keepdims=True) + eps)
    xhat = (x - mean) * rstd
    wdy = w * dy
    c1 = (xhat * wdy).mean(axis=1, keepdims=True)
    c2 = wdy.mean(axis=1, keepdims=True)
    return xhat * w + b, mean[:, 0], rstd[:, 0], (wdy - (xhat * c1 + c2)) * rstd, (dy * xhat).sum(0), dy.sum(0)


def test_adr0007_t53_tutorial_05_layer_norm_forward_and_backward_kernels(tutorial):
    t = tutorial("triton_05_layer_norm")
    eps = 1e-5

    def bench(torch):
        torch.manual_seed(0)
        M, N, dtype = 37, 300, torch.float16
        x_shape = (M, N)
        w_shape = (x_shape[-1], )
        weight = torch.rand(w_shape, dtype=dtype, device=t.DEVICE)
        bias = torch.rand(w_shape, dtype=dtype, device=t.DEVICE)
        x = -2.3 + 0.5 * torch.randn(x_shape, dtype=dtype, device=t.DEVICE)
        dy = .1 * torch.randn_like(x)
        y_tri, saved, block_size, num_warps = t.layer_norm_forward(x, w_shape, weight, bias, eps)
        y_ref = torch.nn.functional.layer_norm(x, w_shape, weight, bias, eps).to(dtype)
        dx_tri, dw_tri, db_tri = t.layer_norm_backward(dy, saved, block_size, num_warps)
        return wide(x, weight, bias, dy, y_tri, saved[3], saved[4], dx_tri, dw_tri, db_tri, y_ref)

    (x, w, b, dy, y, mean, rstd, dx, dw, db, y_torch), _ = run_strict(bench)
    expected = _layer_norm_reference(x, w, b, dy, eps)
    for got, want, dtype_name in zip((y, mean, rstd, dx, dw, db), expected, ("f16", "f32", "f32", "f16", "f16", "f16")):
        assert_close(got, want, dtype_name)
    assert_close(y_torch, y, "f16")


def _attention_reference(q, k, v, causal, sm_scale):
    scores = q @ k.transpose(0, 1, 3, 2) * sm_scale
    if causal:
        n_ctx = q.shape[2]
        scores = np.where(np.tril(np.ones((n_ctx, n_ctx))) == 0, -np.inf, scores)
    top = scores.max(axis=-1, keepdims=True)
    p = np.exp(scores - top)
    total = p.sum(axis=-1, keepdims=True)
    log2_sum = (np.log(total) + top)[..., 0] / np.log(2)
    return (p / total) @ v, log2_sum


@pytest.mark.parametrize("head_dim", [64, 128], ids=["d64", "d128-split-acc"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("host_descriptor", [False, True], ids=["in-kernel-descriptors", "host-descriptors"])
def test_adr0007_t54_tutorial_06_fused_attention_forward_with_descriptors(tutorial, host_descriptor, causal, head_dim):
    t = tutorial("triton_06_fused_attention")
    sm_scale = 0.5

    def bench(torch):
        torch.manual_seed(20)
        Z, H, N_CTX, HEAD_DIM, dtype = 1, 2, 128, head_dim, torch.float16
        q = 0.5 * torch.randn((Z, H, N_CTX, HEAD_DIM), dtype=dtype, device=t.DEVICE)
        k = 0.5 * torch.randn((Z, H, N_CTX, HEAD_DIM), dtype=dtype, device=t.DEVICE)
        v = 0.5 * torch.randn((Z, H, N_CTX, HEAD_DIM), dtype=dtype, device=t.DEVICE)
        o, M = t.attention_forward(q, k, v, causal, sm_scale, host_descriptor=host_descriptor)
        return wide(q, k, v, o, M)

    (q, k, v, o, m), _ = run_strict(bench)
    expected_o, expected_m = _attention_reference(q, k, v, causal, sm_scale)
    assert_close(o, expected_o, "f16")
    assert_close(m, expected_m, "f32")
