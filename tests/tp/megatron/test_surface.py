"""ADR 0011: docs/megatron-surface.md, the `megatron.core` names kernbench provides, is what the code generates."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_adr0011_t126_the_megatron_surface_page_is_what_the_code_generates():
    spec = importlib.util.spec_from_file_location("megatron_surface", ROOT / "docs" / "megatron_surface.py")
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    page = (ROOT / "docs" / "megatron-surface.md").read_text()
    assert page == generator.render(), \
        "docs/megatron-surface.md is stale: run python docs/megatron_surface.py > docs/megatron-surface.md"
    for name in ("_CopyToModelParallelRegion", "linear_with_grad_accumulation_and_async_allreduce", "checkpoint",
                 "CheckpointWithoutOutput", "convert_cuda_rng_state", "vocab_parallel_cross_entropy",
                 "broadcast_data", "param_is_not_tensor_parallel_duplicate"):
        assert f"| `{name}` |" in page
