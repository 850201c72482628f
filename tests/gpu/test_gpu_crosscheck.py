"""ADR 0007 T90-T92: the same kernel files on a real GPU (torch + Triton) and on kernbench agree.

Skips cleanly where torch or a CUDA device is absent (as in CI); on a machine
with an NVIDIA GPU it runs the library kernels on both and compares the
results with the per-dtype tolerance helper.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernbench.kernels.library.matmul import matmul
from kernbench.kernels.library.vector_add import add
from kernbench.numerics import assert_close
from kernbench.session import Session
from kernbench.tp import kernels as tp_kernels

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

NUMPY_DTYPES = {"f16": np.float16, "f32": np.float32}
TORCH_DTYPES = {"f16": torch.float16, "f32": torch.float32}


def on_gpu(array: np.ndarray):
    return torch.from_numpy(array).to("cuda")


def run_on_kernbench(launch, inputs: list[np.ndarray], out_shape, dtype_name: str) -> np.ndarray:
    session = Session("default")
    result = []

    def bench(kb):
        tensors = [kb.tensor(x, dtype=dtype_name) for x in inputs]
        out = kb.empty(*out_shape, dtype=dtype_name)
        launch(*tensors, out)
        result.append(out.numpy())

    session.run(bench, session.torch)
    return result[0]


@pytest.mark.parametrize("dtype_name", ["f16", "f32"])
@pytest.mark.parametrize("n", [1000, 4096, 98432])
def test_adr0007_t90_vector_add_matches_the_gpu(dtype_name, n):
    rng = np.random.default_rng(n)
    x, y = (rng.standard_normal(n).astype(NUMPY_DTYPES[dtype_name]) for _ in range(2))
    gpu_out = torch.empty(n, dtype=TORCH_DTYPES[dtype_name], device="cuda")
    add(on_gpu(x), on_gpu(y), gpu_out)
    simulated = run_on_kernbench(add, [x, y], (n,), dtype_name)
    assert_close(simulated, gpu_out.cpu().numpy(), dtype_name)


@pytest.mark.parametrize("dtype_name", ["f16", "f32"])
@pytest.mark.parametrize("m, n, k", [(64, 64, 64), (128, 96, 80), (256, 256, 128)])
def test_adr0007_t91_gemm_matches_the_gpu(dtype_name, m, n, k):
    rng = np.random.default_rng(m * n * k)
    a = rng.standard_normal((m, k)).astype(NUMPY_DTYPES[dtype_name])
    b = rng.standard_normal((k, n)).astype(NUMPY_DTYPES[dtype_name])
    gpu_c = torch.empty(m, n, dtype=TORCH_DTYPES[dtype_name], device="cuda")
    matmul(on_gpu(a), on_gpu(b), gpu_c)
    simulated = run_on_kernbench(matmul, [a, b], (m, n), dtype_name)
    assert_close(simulated, gpu_c.cpu().numpy(), dtype_name)


@pytest.mark.parametrize("m, n, k", [(64, 96, 80), (256, 512, 128)])
def test_adr0007_t92_tensor_parallel_kernels_match_the_gpu(m, n, k):
    """The TP layers' own kernels: linear with bias (Megatron's (out, in) weight), then bias + GELU, f16."""
    rng = np.random.default_rng(m + n + k)
    x = rng.standard_normal((m, k)).astype(np.float16)
    weight = (rng.standard_normal((n, k)) / np.sqrt(k)).astype(np.float16)
    bias = rng.standard_normal(n).astype(np.float16)
    gpu_y = torch.empty(m, n, dtype=torch.float16, device="cuda")
    tp_kernels.linear(on_gpu(x), on_gpu(weight), on_gpu(bias), gpu_y)
    simulated = run_on_kernbench(tp_kernels.linear, [x, weight, bias], (m, n), "f16")
    assert_close(simulated, gpu_y.cpu().numpy(), "f16")

    gpu_h = torch.empty(m, n, dtype=torch.float16, device="cuda")
    tp_kernels.bias_gelu(gpu_y, on_gpu(bias), gpu_h)
    simulated = run_on_kernbench(tp_kernels.bias_gelu, [gpu_y.cpu().numpy(), bias], (m, n), "f16")
    assert_close(simulated, gpu_h.cpu().numpy(), "f16")
